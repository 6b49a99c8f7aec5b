"""Deliberate differences from 2.0.2 in the conv family (see `expectations`)."""

from __future__ import annotations

ALLOWED: dict[str, tuple[str, str]] = {
    # A fractional kernel size, stride or rate: the original truncated it (a
    # 3.5 kernel became 3) without a word. We raise `InvalidArgumentTypeError`.
    "conv/Conv1D(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv1D(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/Conv1D(stride=fraction)": (
        "garbage",
        "the fractional stride silently truncated to an integer",
    ),
    "conv/Conv1DTranspose(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv1DTranspose(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/Conv2D(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv2D(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/Conv2D(stride=fraction)": (
        "garbage",
        "the fractional stride silently truncated to an integer",
    ),
    "conv/Conv2DTranspose(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv2DTranspose(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/Conv3D(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv3D(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/Conv3D(stride=fraction)": (
        "garbage",
        "the fractional stride silently truncated to an integer",
    ),
    "conv/Conv3DTranspose(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/Conv3DTranspose(rate=fraction)": (
        "garbage",
        "the fractional rate silently truncated to an integer",
    ),
    "conv/DepthwiseConv2D(kernel_shape=fraction)": (
        "garbage",
        "the fractional kernel_shape silently truncated to an integer",
    ),
    "conv/DepthwiseConv2D(stride=fraction)": (
        "garbage",
        "the fractional stride silently truncated to an integer",
    ),
    # `with_bias` given as a string: any string is true in the original, so
    # "False" adds a bias. We raise `TypeError` (`checks.flag`).
    "conv/Conv2D(with_bias=str)": (
        "garbage",
        "any string is true (`with_bias='False'` adds a bias)",
    ),
    "conv/Conv2DTranspose(with_bias=str)": (
        "garbage",
        "any string is true (`with_bias='False'` adds a bias)",
    ),
    "conv/DepthwiseConv2D(with_bias=str)": (
        "garbage",
        "any string is true (`with_bias='False'` adds a bias)",
    ),
    # An empty (zero-size) kernel: the original returned outputs computed
    # from no weights at all (uninitialised values). We raise.
    "conv/Conv3DTranspose(kernel_shape=zero)": (
        "garbage",
        "a non-zero output from an empty kernel (uninitialised values)",
    ),
    "conv/DepthwiseConv2D(kernel_shape=zero)": (
        "garbage",
        "a non-zero output from an empty kernel (uninitialised values)",
    ),
    # Sizes below 1 in `snt.pad`: the original returned negative paddings
    # (or none for a rate of 0). We raise `InvalidArgumentError`.
    "conv/pad.causal(effective_kernel_size=negative)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.causal(effective_kernel_size=zero)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.create(kernel=negative)": ("garbage", "negative paddings"),
    "conv/pad.create(kernel=zero)": ("garbage", "negative paddings"),
    "conv/pad.create(rate=negative)": ("garbage", "negative paddings"),
    "conv/pad.create(rate=zero)": ("garbage", "zero paddings for a rate of 0"),
    "conv/pad.full(effective_kernel_size=negative)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.full(effective_kernel_size=zero)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.reverse_causal(effective_kernel_size=negative)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.reverse_causal(effective_kernel_size=zero)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.same(effective_kernel_size=negative)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    "conv/pad.same(effective_kernel_size=zero)": (
        "garbage",
        "negative paddings, e.g. [-1, 0]",
    ),
    # Fractional sizes in `snt.pad`: the original returned float paddings,
    # which `tf.pad` rejects later. We raise `InvalidArgumentTypeError`.
    "conv/pad.causal(effective_kernel_size=fraction)": (
        "garbage",
        "float paddings [1.0, 1.0] for a fractional size 3.5",
    ),
    "conv/pad.create(kernel=fraction)": (
        "garbage",
        "float paddings computed from a fractional size",
    ),
    "conv/pad.create(rate=fraction)": (
        "garbage",
        "float paddings computed from a fractional size",
    ),
    "conv/pad.full(effective_kernel_size=fraction)": (
        "garbage",
        "float paddings [1.0, 1.0] for a fractional size 3.5",
    ),
    "conv/pad.reverse_causal(effective_kernel_size=fraction)": (
        "garbage",
        "float paddings [1.0, 1.0] for a fractional size 3.5",
    ),
    "conv/pad.same(effective_kernel_size=fraction)": (
        "garbage",
        "float paddings [1.0, 1.0] for a fractional size 3.5",
    ),
    # 1-element tensors as sizes in `snt.pad`: the original returned paddings
    # made of tensors of shape [1]. We raise `InvalidArgumentTypeError`.
    "conv/pad.causal(effective_kernel_size=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    "conv/pad.create(kernel=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    "conv/pad.create(rate=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    "conv/pad.full(effective_kernel_size=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    "conv/pad.reverse_causal(effective_kernel_size=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    "conv/pad.same(effective_kernel_size=tensor_1d)": (
        "garbage",
        "paddings made of 1-element tensors",
    ),
    # An array or tensor of sizes in `snt.pad.create`: not a sequence to the
    # original, which gave every dimension the paddings of all sizes.
    "conv/pad.create(kernel=ndarray)": (
        "garbage",
        "pads every dimension with the paddings of all the sizes (pairs of arrays)",
    ),
    "conv/pad.create(kernel=tensor)": (
        "garbage",
        "pads every dimension with the paddings of all the sizes (pairs of arrays)",
    ),
    "conv/pad.create(rate=ndarray)": (
        "garbage",
        "pads every dimension with the paddings of all the sizes (pairs of arrays)",
    ),
    "conv/pad.create(rate=tensor)": (
        "garbage",
        "pads every dimension with the paddings of all the sizes (pairs of arrays)",
    ),
    # `snt.pad.create(n=-2)`: the original returned paddings for 0 spatial
    # dimensions. We raise `InvalidArgumentError`.
    "conv/pad.create(n=negative)": (
        "garbage",
        "[[0, 0], [0, 0]] for a negative number of dimensions",
    ),
    # `snt.pad.create` tests only `channel_index == 1` and pads every other
    # value as channels-last, which is wrong for any axis but -1 and n + 1
    # (and for non-integers). We take 1, -1 and n + 1 and raise otherwise.
    "conv/pad.create(channel_index=None)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=fraction)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=list)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=negative)": (
        "garbage",
        "channels-last paddings for channel_index=-3 (axis 1, channels first)",
    ),
    "conv/pad.create(channel_index=str)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=tensor_1d)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=tuple)": (
        "garbage",
        "channels-last paddings whatever the value (only `== 1` is tested)",
    ),
    "conv/pad.create(channel_index=zero)": (
        "garbage",
        "channels-last paddings for channel_index=0 (the batch axis)",
    ),
    # Whole floats as sizes (`4.0`, `np.float32(4)`, a float scalar tensor):
    # the original failed building a shape from some of them (it took them
    # elsewhere); we take them as the integer.
    "conv/Conv1D(output_channels=np.float32)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv1DTranspose(output_channels=np.float32)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv1DTranspose(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv1DTranspose(stride=np.float32)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(stride=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv1DTranspose(stride=whole_floats)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2D(output_channels=np.float32)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(output_channels=np.float32)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(output_channels=tensor_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(stride=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(stride=whole_floats)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3D(output_channels=np.float32)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(output_channels=np.float32)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(output_channels=tensor_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(output_channels=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(stride=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(stride=whole_floats)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/DepthwiseConv2D(channel_multiplier=np.float32)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/DepthwiseConv2D(channel_multiplier=whole_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/DepthwiseConv2D(rate=np.float32)": ("lenient", "original raises TypeError"),
    "conv/DepthwiseConv2D(rate=whole_float)": ("lenient", "original raises TypeError"),
    "conv/DepthwiseConv2D(rate=whole_floats)": ("lenient", "original raises TypeError"),
    # A scalar NumPy array or tensor as `stride`/`rate`: the original passed
    # it to TensorFlow, which failed iterating it; we take it as the integer.
    "conv/Conv1D(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(stride=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv1D(stride=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(rate=tensor)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(stride=tensor_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv1DTranspose(stride=tensor_int64)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2D(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(stride=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(stride=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(rate=tensor)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(stride=tensor_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv2DTranspose(stride=tensor_int64)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3D(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(stride=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(stride=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(rate=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(rate=tensor)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(rate=tensor_float)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(rate=tensor_int64)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(stride=np0d)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(stride=tensor_float)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(stride=tensor_int64)": (
        "lenient",
        "original raises TypeError",
    ),
    # An int64 scalar tensor as `output_channels` of a transposed
    # convolution: the original failed building the int32 output shape.
    "conv/Conv2DTranspose(output_channels=tensor_int64)": (
        "lenient",
        "original raises TypeError",
    ),
    "conv/Conv3DTranspose(output_channels=tensor_int64)": (
        "lenient",
        "original raises TypeError",
    ),
    # Channels-first layouts on CPU: the original's TensorFlow CPU kernels
    # reject them; we transpose to channels-last around the op.
    "conv/Conv1D(data_format='NCW')": ("lenient", "original raises UnimplementedError"),
    "conv/Conv1DTranspose(data_format='NCW')": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/Conv2D(data_format='NCHW')": (
        "lenient",
        "original raises UnimplementedError",
    ),
    "conv/Conv2DTranspose(data_format='NCHW')": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/Conv3D(data_format='NCDHW')": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/Conv3DTranspose(data_format='NCDHW')": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/DepthwiseConv2D(data_format='NCHW')": (
        "lenient",
        "original raises UnimplementedError",
    ),
    # `data_format=None`: the original failed parsing it; we use the
    # channels-last default.
    "conv/Conv1D(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/Conv1DTranspose(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/Conv2D(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/Conv2DTranspose(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/Conv3D(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/Conv3DTranspose(data_format=None)": ("lenient", "original raises TypeError"),
    "conv/DepthwiseConv2D(data_format=None)": ("lenient", "original raises TypeError"),
    # Dilated transposed convolutions on CPU: TensorFlow's CPU kernels do
    # not implement them; we dilate the kernel explicitly.
    "conv/Conv1DTranspose(rate=two)": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/Conv2DTranspose(rate=two)": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    "conv/Conv3DTranspose(rate=two)": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    # Inputs given as nested lists (or, for the transposed convolutions,
    # NumPy arrays): the original read `.shape` off them and failed; we
    # convert them to tensors.
    "conv/Conv1D(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv1DTranspose(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv1DTranspose(@inputs=ndarray)": (
        "lenient",
        "original raises AttributeError",
    ),
    "conv/Conv2D(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv2DTranspose(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv2DTranspose(@inputs=ndarray)": (
        "lenient",
        "original raises AttributeError",
    ),
    "conv/Conv3D(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv3DTranspose(@inputs=list)": ("lenient", "original raises AttributeError"),
    "conv/Conv3DTranspose(@inputs=ndarray)": (
        "lenient",
        "original raises AttributeError",
    ),
    "conv/DepthwiseConv2D(@inputs=list)": ("lenient", "original raises AttributeError"),
    # `DepthwiseConv2D(padding='same')`: the original passed the string on
    # unchanged and the op refused lower case; we accept any case (as the
    # other convolutions do).
    "conv/DepthwiseConv2D(padding='same')": (
        "lenient",
        "original raises InvalidArgumentError",
    ),
    # `snt.pad.create(n=...)` as a 0-d array or scalar tensor: the original
    # failed multiplying a tuple by it; we take it as the integer.
    "conv/pad.create(n=np0d)": ("lenient", "original raises TypeError"),
    "conv/pad.create(n=tensor)": ("lenient", "original raises ValueError"),
    "conv/pad.create(n=tensor_int64)": ("lenient", "original raises ValueError"),
}
