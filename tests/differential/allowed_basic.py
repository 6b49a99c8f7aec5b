"""Deliberate differences from 2.0.2 in basic modules and nets (see `expectations`)."""

from __future__ import annotations

_LIST = "inputs given as a Python list or NumPy array are converted to a tensor"

ALLOWED: dict[str, tuple[str, str]] = {
    # The original read `inputs.shape` (AttributeError) or `shape.rank` of a
    # NumPy shape tuple; we convert array-likes as TF ops do.
    "basic/Linear(@inputs=list)": ("lenient", _LIST),
    "basic/Bias(@inputs=list)": ("lenient", _LIST),
    "basic/Reshape(@inputs=ndarray)": ("lenient", _LIST),
    "basic/Reshape(@inputs=list)": ("lenient", _LIST),
    "basic/flatten(inputs=ndarray)": ("lenient", _LIST),
    "basic/flatten(inputs=list)": ("lenient", _LIST),
    "basic/reshape(inputs=ndarray)": ("lenient", _LIST),
    "basic/reshape(inputs=list)": ("lenient", _LIST),
    "basic/Sequential(@inputs=list)": ("lenient", _LIST),
    "nets/MLP(@inputs=list)": ("lenient", _LIST),
    "basic/BatchApply(@inputs=ndarray)": ("lenient", _LIST),
    # A 1-D array of axes, as a list of them.
    "basic/Bias(bias_dims=ndarray)": ("lenient", "bias_dims as a 1-D array"),
    # A scalar `x` with `example` of batch size 1 splits to `example`'s
    # leading shape (one element), as a `[1]` tensor would.
    "basic/split_leading_dim(x=scalar)": ("lenient", "a one-element x"),
    # `tf.nn.dropout` refuses 0-d arrays as rates; they are numbers.
    "basic/Dropout(train)(rate=np0d)": ("lenient", "a 0-d array rate"),
    "basic/Dropout(train)(rate=np0d_float32)": ("lenient", "a 0-d array rate"),
    # A zero-size layer: the original's default initializer divided by zero.
    "nets/MLP(output_sizes=zero)": ("lenient", "a zero-size layer"),
    # The CPU has no NCHW convolution kernel; we transpose around it.
    "nets/Cifar10ConvNet(data_format='NCHW')": ("lenient", "NCHW on CPU"),
    # NumPy bools and boolean tensors for `test_local_stats`, as for
    # `is_training`.
    "nets/Cifar10ConvNet(@test_local_stats=np.bool)": ("lenient", "np.bool_ flag"),
    "nets/Cifar10ConvNet(@test_local_stats=tensor)": ("lenient", "tensor flag"),
    # int64 sizes are sizes (the original's one_hot wanted an int32 depth).
    "nets/VectorQuantizer(num_embeddings=tensor_int64)": ("lenient", "int64 size"),
    "nets/VectorQuantizerEMA(num_embeddings=tensor_int64)": ("lenient", "int64 size"),
}
