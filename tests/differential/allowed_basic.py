"""Deliberate differences from 2.0.2 in basic modules and nets (see `expectations`)."""

from __future__ import annotations

_LIST = "inputs given as a Python list or NumPy array are converted to a tensor"

# Reasons of the entries decided in issue 12's second round (README
# migration notes: "Refused where 2.0.2 returned garbage", "Accepted").
_FUNCTIONAL_DTYPE = "the int64 step of Adam became int32"
_STRING_FLAG = "a string flag was read by its truth value ('False' is true)"
_STRING_METHODS = "a string call_methods was iterated letter by letter"
_NON_FINITE = "a NaN or infinite value only ever gave NaN (or all-zero) outputs"
_LIST_COST = "a one-element list commitment_cost gave a [1] loss"
_FLOAT64 = "a float64 tensor hyper-parameter, cast to the compute dtype"
_MODE_FLAG = "a mode flag read by its truth value (fused kernel wanted a bool)"
_BN_FLAGS = "bn_config may set create_scale/create_offset"

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
    # Decided in issue 12's second round (see the README migration notes).
    "basic/Linear(with_bias=str)": ("garbage", _STRING_FLAG),
    "basic/Dropout(eval)(@is_training=str)": ("garbage", _STRING_FLAG),
    "basic/Dropout(train)(@is_training=str)": ("garbage", _STRING_FLAG),
    "basic/Embed(densify_gradients=str)": ("garbage", _STRING_FLAG),
    "basic/Embed(trainable=str)": ("garbage", _STRING_FLAG),
    "nets/MLP(with_bias=str)": ("garbage", _STRING_FLAG),
    "nets/MLP(activate_final=str)": ("garbage", _STRING_FLAG),
    "nets/MLP(dropout_train)(@is_training=str)": ("garbage", _STRING_FLAG),
    "nets/VectorQuantizer(@is_training=str)": ("garbage", _STRING_FLAG),
    "nets/VectorQuantizerEMA(@is_training=str)": ("garbage", _STRING_FLAG),
    "basic/Deferred(call_methods=str)": ("garbage", _STRING_METHODS),
    "basic/Dropout(train)(rate=nan)": ("garbage", _NON_FINITE),
    "basic/ExponentialMovingAverage(decay=nan)": ("garbage", _NON_FINITE),
    "basic/ExponentialMovingAverage(decay=inf)": ("garbage", _NON_FINITE),
    "nets/VectorQuantizer(commitment_cost=nan)": ("garbage", _NON_FINITE),
    "nets/VectorQuantizer(commitment_cost=inf)": ("garbage", _NON_FINITE),
    "nets/VectorQuantizerEMA(commitment_cost=nan)": ("garbage", _NON_FINITE),
    "nets/VectorQuantizerEMA(commitment_cost=inf)": ("garbage", _NON_FINITE),
    "nets/VectorQuantizer(commitment_cost=list)": ("fixed", _LIST_COST),
    "nets/VectorQuantizerEMA(commitment_cost=list)": ("fixed", _LIST_COST),
    "basic/ExponentialMovingAverage(decay=tensor_float64)": ("lenient", _FLOAT64),
    "nets/Cifar10ConvNet(@test_local_stats=int)": ("lenient", _MODE_FLAG),
    "nets/Cifar10ConvNet(@test_local_stats=np0d)": ("lenient", _MODE_FLAG),
    "nets/ResNet(bn_config=create_scale)": ("lenient", _BN_FLAGS),
    # The original's functional variables ignored `dtype=`: Adam's int64 step
    # became an int32 one. Ours keep the variable's dtype.
    "nets/functional.adam(base)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=float)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=np.float32)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=np.float64)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=np0d)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=np0d_float32)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=tensor)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=tensor_float64)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=variable)": ("fixed", _FUNCTIONAL_DTYPE),
    "nets/functional.adam(learning_rate=list)": ("fixed", _FUNCTIONAL_DTYPE),
}
