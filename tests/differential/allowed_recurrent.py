"""Deliberate differences from 2.0.2 in the recurrent family (see `expectations`)."""

from __future__ import annotations

# Reasons of the entries decided in issue 12's second round (README
# migration notes: "Refused where 2.0.2 returned garbage", "Accepted").
_NON_FINITE = "a NaN or infinite value only ever gave NaN (or all-zero) outputs"
_NUMPY_PRIVATE = "NumPy's private _UFuncNoLoopError; ours is a TypeError"
_STRING_FLAG = "a string flag was read by its truth value ('False' is true)"
_TENSOR_SIZE = "a scalar integer tensor size (as the original's GRU took)"
_FLOAT64 = "a float64 tensor hyper-parameter, cast to the compute dtype"
_DTYPE = "a dtype in any spelling tf.as_dtype takes"
_ARRAY_INPUTS = "inputs given as a list or NumPy array are converted"
_WHOLE_FLOAT = "a whole float size, as the conv modules take"
_NCHW = "NCHW on CPU (transposed around the NHWC kernel)"
_RATE = "a 0-d array or float64 tensor dropout rate"
_LENGTHS = "sequence_length as a list or an int64/float tensor"
_TUPLE_STATE = "a plain (hidden, cell) tuple as the LSTM state"
_EMPTY_PROJECTION = "projection_size=0: empty outputs, a state of the wrong size"

ALLOWED: dict[str, tuple[str, str]] = {
    # The original iterates `layers` twice, so a generator gives a DeepRNN
    # without layers (outputs = inputs); we keep the layers.
    "recurrent/DeepRNN(layers=generator)": ("fixed", "generator layers dropped"),
    # Decided in issue 12's second round (see the README migration notes).
    "recurrent/LSTM(forget_bias=nan)": ("garbage", _NON_FINITE),
    "recurrent/LSTM(forget_bias=inf)": ("garbage", _NON_FINITE),
    "recurrent/lstm_with_recurrent_dropout(dropout=nan)": ("garbage", _NON_FINITE),
    "recurrent/Conv2DLSTM(kernel_shape=str)": ("private", _NUMPY_PRIVATE),
    "recurrent/deep_rnn_with_skip_connections(concat_final_output=str)": (
        "garbage",
        _STRING_FLAG,
    ),
    "recurrent/LSTM(hidden_size=tensor)": ("lenient", _TENSOR_SIZE),
    "recurrent/LSTM(hidden_size=tensor_int64)": ("lenient", _TENSOR_SIZE),
    "recurrent/LSTM(projection_size=tensor)": ("lenient", _TENSOR_SIZE),
    "recurrent/LSTM(projection_size=tensor_int64)": ("lenient", _TENSOR_SIZE),
    "recurrent/UnrolledLSTM(hidden_size=tensor)": ("lenient", _TENSOR_SIZE),
    "recurrent/UnrolledLSTM(hidden_size=tensor_int64)": ("lenient", _TENSOR_SIZE),
    "recurrent/lstm_with_recurrent_dropout(hidden_size=tensor)": (
        "lenient",
        _TENSOR_SIZE,
    ),
    "recurrent/lstm_with_recurrent_dropout(hidden_size=tensor_int64)": (
        "lenient",
        _TENSOR_SIZE,
    ),
    "recurrent/LSTM(forget_bias=tensor_float64)": ("lenient", _FLOAT64),
    "recurrent/UnrolledLSTM(forget_bias=tensor_float64)": ("lenient", _FLOAT64),
    "recurrent/Conv2DLSTM(forget_bias=tensor_float64)": ("lenient", _FLOAT64),
    "recurrent/lstm_with_recurrent_dropout(dropout=tensor_float64)": (
        "lenient",
        _FLOAT64,
    ),
    "recurrent/LSTM(dtype=str_float32)": ("lenient", _DTYPE),
    "recurrent/LSTM(dtype=np.float32)": ("lenient", _DTYPE),
    "recurrent/LSTM(dtype=np.dtype)": ("lenient", _DTYPE),
    "recurrent/GRU(dtype=str_float32)": ("lenient", _DTYPE),
    "recurrent/GRU(dtype=np.float32)": ("lenient", _DTYPE),
    "recurrent/GRU(dtype=np.dtype)": ("lenient", _DTYPE),
    "recurrent/VanillaRNN(dtype=str_float32)": ("lenient", _DTYPE),
    "recurrent/VanillaRNN(dtype=np.float32)": ("lenient", _DTYPE),
    "recurrent/VanillaRNN(dtype=np.dtype)": ("lenient", _DTYPE),
    "recurrent/UnrolledLSTM(dtype=str_float32)": ("lenient", _DTYPE),
    "recurrent/UnrolledLSTM(dtype=np.float32)": ("lenient", _DTYPE),
    "recurrent/UnrolledLSTM(dtype=np.dtype)": ("lenient", _DTYPE),
    "recurrent/Conv2DLSTM(dtype=str_float32)": ("lenient", _DTYPE),
    "recurrent/Conv2DLSTM(dtype=np.float32)": ("lenient", _DTYPE),
    "recurrent/Conv2DLSTM(dtype=np.dtype)": ("lenient", _DTYPE),
    "recurrent/LSTM(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/LSTM(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/GRU(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/GRU(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/VanillaRNN(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/VanillaRNN(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/UnrolledLSTM(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/UnrolledLSTM(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv1DLSTM(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv1DLSTM(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv2DLSTM(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv2DLSTM(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv3DLSTM(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv3DLSTM(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/DeepRNN(@inputs=ndarray)": ("lenient", _ARRAY_INPUTS),
    "recurrent/DeepRNN(@inputs=list)": ("lenient", _ARRAY_INPUTS),
    "recurrent/Conv2DLSTM(kernel_shape=whole_float)": ("lenient", _WHOLE_FLOAT),
    "recurrent/Conv2DLSTM(kernel_shape=np.float32)": ("lenient", _WHOLE_FLOAT),
    "recurrent/Conv2DLSTM(kernel_shape=tensor_float)": ("lenient", _WHOLE_FLOAT),
    "recurrent/Conv2DLSTM(kernel_shape=whole_floats)": ("lenient", _WHOLE_FLOAT),
    "recurrent/Conv2DLSTM(data_format='NCHW')": ("lenient", _NCHW),
    "recurrent/lstm_with_recurrent_dropout(dropout=np0d)": ("lenient", _RATE),
    "recurrent/lstm_with_recurrent_dropout(dropout=np0d_float32)": ("lenient", _RATE),
    "recurrent/dynamic_unroll(sequence_length=list)": ("lenient", _LENGTHS),
    "recurrent/dynamic_unroll(sequence_length=int64)": ("lenient", _LENGTHS),
    "recurrent/dynamic_unroll(sequence_length=float)": ("lenient", _LENGTHS),
    "recurrent/static_unroll(sequence_length=list)": ("lenient", _LENGTHS),
    "recurrent/dynamic_unroll(initial_state=tuple)": ("lenient", _TUPLE_STATE),
    "recurrent/static_unroll(initial_state=tuple)": ("lenient", _TUPLE_STATE),
    "recurrent/LSTM(projection_size=zero)": ("garbage", _EMPTY_PROJECTION),
}
