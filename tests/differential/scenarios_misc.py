"""Differential scenarios: regularizers, distribute, mixed precision, functional,
core utilities (`Module`, `once`, `build`, ...), and user extensions.

Loaded by `harness.py` in both environments: imports only snt, tf, numpy and
wrapt.
"""

import functools

import numpy as np
import tensorflow as tf
import wrapt

import sonnet as snt


def register(h):
    # -- regularizers
    for cls in (
        snt.regularizers.L1,
        snt.regularizers.L2,
        snt.regularizers.OffDiagonalOrthogonal,
    ):
        h.grid(
            f"regularizers.{cls.__name__}",
            lambda _c=cls, **kw: _regularize(h, _c, **kw),
            {"scale": 0.5},
            {
                "scale": h.floats(0.5),
                "@tensors": [
                    ("empty", lambda: []),
                    ("tuple", lambda: (tf.ones([2, 2]),)),
                    ("variable", lambda: [tf.Variable(tf.ones([2, 2]))]),
                    ("ndarray", lambda: [np.ones([2, 2], np.float32)]),
                    ("float64", lambda: [tf.ones([2, 2], tf.float64)]),
                    ("mixed_dtypes", lambda: [tf.ones([2]), tf.ones([2], tf.float64)]),
                    ("single_tensor", lambda: tf.ones([2, 2])),
                ],
            },
        )

    # -- distribute
    h.grid(
        "distribute.Replicator",
        _replicator,
        {"devices": ["/cpu:0"]},
        {"devices": [("None", lambda: None), ("tuple", lambda: ("/cpu:0",))]},
    )
    h.add("distribute.TpuReplicator", lambda: snt.distribute.TpuReplicator() and "ok")
    h.add("distribute.create_variables_eagerly", _create_variables_eagerly)
    for autograph in (True, False):
        h.add(
            f"distribute.create_variables_eagerly/eager_initializer/autograph={autograph}",
            lambda _a=autograph: _eager_initializer(_a),
        )
    h.add(
        "distribute.create_variables_eagerly/initializer_needing_the_graph",
        _initializer_needing_the_graph,
    )

    # -- mixed precision
    h.grid(
        "mixed_precision.scope",
        _mixed_precision_scope,
        {"dtype": tf.float16},
        {
            "dtype": [
                ("float16", lambda: tf.float16),
                ("bfloat16", lambda: tf.bfloat16),
                ("float32", lambda: tf.float32),
                ("str", lambda: "float16"),
                ("int32", lambda: tf.int32),
                ("None", lambda: None),
            ]
        },
    )
    h.add("mixed_precision.enable_disable", _mixed_precision_enable)

    # -- functional
    h.add("functional.transform", _transform)
    h.add("functional.transform_with_state", _transform_with_state)
    h.add("functional.grad", lambda: _grad(snt.functional.grad))
    h.add("functional.value_and_grad", lambda: _grad(snt.functional.value_and_grad))
    h.add("functional.grad(has_aux)", _grad_aux)
    h.add("functional.jit", _jit)
    h.add("functional.device_put_get", _device_put_get)

    # -- core utilities
    h.grid(
        "Module",
        lambda **kw: snt.Module(**kw),
        {},
        {"name": h.names() + [("unicode", lambda: "módulo")]},
    )
    h.add("Module(variables_empty)", lambda: snt.Module().variables)
    h.add("Module(allow_empty_variables)", _allow_empty)
    h.add("Module(subclass_naming)", _subclass_naming)
    h.add("Module(no_super_init)", _no_super_init)
    h.add("Module(no_name_scope)", _no_name_scope)
    h.add("Module(name_scope_nesting)", _nested_names)
    h.add("Module(lazy_submodules_in_one_trace)", _lazy_submodules_in_one_trace)
    h.add("once", _once)
    h.add("once(retry_after_error)", _once_retry)
    h.add("build", _build)
    h.add("build(not_a_module)", lambda: snt.build(lambda x: x * 2, tf.TensorSpec([2])))
    h.add("format_variables", _format_variables)
    h.grid(
        "format_variables(tablefmt)",
        lambda **kw: snt.format_variables(_three_variables(), **kw),
        {},
        {"tablefmt": [("orgtbl", lambda: "orgtbl"), ("github", lambda: "github")]},
    )
    h.add("log_variables", lambda: snt.log_variables(_three_variables()))
    h.add("custom_variable_getter", _custom_getter)
    h.add("Optimizer(subclass)", _custom_optimizer)

    # -- user extensions
    h.add("extension/Metric_as_moving_statistics", _custom_metric_batch_norm)
    h.add("extension/Metric_minimal", _custom_metric_alone)
    for mode in ("eager", "autograph", "no_autograph"):
        h.add(f"extension/wrapt_method({mode})", lambda _m=mode: _wrapt_method(h, _m))
        h.add(f"extension/wraps_method({mode})", lambda _m=mode: _wraps_method(h, _m))
        for unroll in ("dynamic_unroll", "static_unroll"):
            h.add(
                f"extension/custom_core_{unroll}({mode})",
                lambda _u=unroll, _m=mode: _custom_core(h, _u, _m),
            )
            h.add(
                f"extension/nested_state_core_{unroll}({mode})",
                lambda _u=unroll, _m=mode: _nested_core(h, _u, _m),
            )
    h.add("extension/custom_initializer", _custom_initializer)
    h.add("extension/autograph_control_flow", _autograph_control_flow)
    h.add("extension/unknown_batch_mlp", _unknown_batch_mlp)
    h.add("extension/unknown_rank_linear", _unknown_rank_linear)
    h.add("extension/Sequential_tf_function_method", _module_tf_function_method)


def _regularize(h, cls, **kwargs):
    tensors = kwargs.pop("@tensors", None)
    if tensors is None:
        tensors = [tf.constant(h.ramp((3, 3))), tf.constant(h.ramp((3,), phase=1.0))]
    return cls(**kwargs)(tensors)


def _replicator(**kwargs):
    strategy = snt.distribute.Replicator(**kwargs)
    with strategy.scope():
        mod = snt.Linear(2, w_init=snt.initializers.Ones())
    out = strategy.run(lambda: mod(tf.ones([1, 3])))
    # The first replica only: our pytest process has 4 logical CPUs, the
    # original's has 1, so `devices=None` makes a different number of replicas.
    first = strategy.experimental_local_results(out)[0]
    return first, type(strategy).__mro__[1].__name__


def _create_variables_eagerly():
    mod = snt.Linear(2, w_init=snt.initializers.Constant(0.5))
    f = tf.function(snt.distribute.create_variables_eagerly(lambda x: mod(x)))
    return f(tf.ones([1, 3])), mod


def _eager_initializer(autograph):
    # 2.0.2 runs every `Initializer` called inside the wrapper eagerly, so
    # one may use eager values.
    class Ones(snt.initializers.Initializer):
        def __call__(self, shape, dtype):
            assert tf.executing_eagerly()
            return tf.ones(shape, dtype) * float(tf.reduce_sum(tf.ones([2])).numpy())

    init = Ones()
    f = tf.function(
        snt.distribute.create_variables_eagerly(lambda: init([2], tf.float32)),
        autograph=autograph,
    )
    return f()


def _initializer_needing_the_graph():
    # An initializer that reads a traced tensor fails eagerly and runs in the
    # graph instead.
    class Scaled(snt.initializers.Initializer):
        scale = None

        def __call__(self, shape, dtype):
            return tf.ones(shape, dtype) * self.scale

    init = Scaled()

    @tf.function
    def f(x):
        init.scale = x
        return snt.distribute.create_variables_eagerly(lambda: init([2], tf.float32))()

    return f(tf.constant(3.0))


def _mixed_precision_scope(dtype):
    mod = snt.Linear(2, w_init=snt.initializers.Constant(0.5))
    x = tf.ones([1, 3])
    with snt.mixed_precision.scope(dtype):
        first = mod(x)
        second = mod(x)
    return first, second, mod


def _mixed_precision_enable():
    mod = snt.Linear(2, w_init=snt.initializers.Constant(0.5))
    x = tf.ones([1, 3])
    snt.mixed_precision.enable(tf.float16)
    try:
        outs = [mod(x), mod(x)]
    finally:
        snt.mixed_precision.disable()
    outs.append(mod(x))
    return outs


def _transform():
    with snt.functional.variables():
        mod = snt.Linear(2, w_init=snt.initializers.Constant(0.5))
    f = snt.functional.transform(lambda x: mod(x))
    x = tf.ones([1, 3])
    params = f.init(x)
    new_params = tf.nest.map_structure(lambda p: p + 1.0, params)
    return sorted(p.shape.as_list() for p in params), f.apply(new_params, x)


def _transform_with_state():
    with snt.functional.variables():
        ema = snt.ExponentialMovingAverage(0.5)
    f = snt.functional.transform_with_state(lambda x: ema(x))
    x = tf.constant([1.0, 2.0])
    params, state = f.init(x)
    out, state = f.apply(params, state, x)
    out2, state = f.apply(params, state, x * 3.0)
    g = snt.functional.without_state(f)
    return len(params), out, out2, g.init is not None


def _grad(transform):
    def f(x, y):
        return tf.reduce_sum(x * x * y)

    return transform(f)(tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0]))


def _grad_aux():
    def f(x):
        return tf.reduce_sum(x * x), x * 2.0

    return snt.functional.grad(f, has_aux=True)(tf.constant([1.0, 2.0]))


def _jit():
    f = snt.functional.jit(lambda x: x * 2.0 + 1.0)
    return f(tf.constant([1.0, 2.0]))


def _device_put_get():
    t = snt.functional.device_put(tf.constant([1.0, 2.0]))
    return snt.functional.device_get(t)


def _allow_empty():
    @snt.allow_empty_variables
    class Empty(snt.Module):
        pass

    mod = snt.allow_empty_variables(snt.Module())
    return Empty().variables, Empty().trainable_variables, mod.variables


def _subclass_naming():
    class MyFancyModule(snt.Module):
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.ones([x.shape[-1]]), name="w")
            return x * self.w

    class HTTPClient(snt.Module):
        pass

    mod = MyFancyModule()
    mod(tf.ones([2]))
    return mod.name, HTTPClient().name, mod, mod.name_scope.name


def _no_super_init():
    class Broken(snt.Module):
        def __init__(self):
            pass

    return Broken()


def _no_name_scope():
    class M(snt.Module):
        @snt.no_name_scope
        def scoped(self):
            return tf.Variable(1.0, name="v").name

        def unscoped(self):
            return tf.Variable(1.0, name="v").name

    m = M(name="m")
    return m.scoped(), m.unscoped()


def _nested_names():
    class Outer(snt.Module):
        def __init__(self):
            super().__init__()
            self.inner = snt.Linear(2, name="inner")

        def __call__(self, x):
            return self.inner(x)

    outer = Outer()
    outer(tf.ones([1, 3]))
    return outer, outer.inner.name, outer.inner.module_name


def _once():
    calls = []

    class M(snt.Module):
        @snt.once
        def setup(self, value):
            calls.append(value)

    m = M()
    m.setup(1)
    m.setup(2)
    other = M()
    other.setup(3)

    @snt.once
    def plain():
        calls.append("plain")

    plain()
    plain()
    return calls


def _once_retry():
    attempts = []

    @snt.once
    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise ValueError("first")

    try:
        flaky()
    except ValueError:
        pass
    flaky()
    flaky()
    return len(attempts)


def _build():
    mod = snt.Linear(2)
    spec = snt.build(mod, tf.TensorSpec([None, 3]))
    return spec.shape.as_list(), spec.dtype, mod


def _three_variables():
    with tf.name_scope("scope"):
        return [
            tf.Variable(tf.zeros([2, 3]), name="a"),
            tf.Variable(tf.zeros([4], tf.int32), name="b", trainable=False),
            tf.Variable(1.0, name="c"),
        ]


def _format_variables():
    mod = snt.nets.MLP([2, 3])
    mod(tf.ones([1, 2]))
    return snt.format_variables(mod.variables)


def _custom_getter():
    mod = snt.Linear(2, w_init=snt.initializers.Ones())
    mod(tf.ones([1, 3]))
    with snt.custom_variable_getter(lambda v: v * 2.0):
        doubled = mod(tf.ones([1, 3]))
    with snt.custom_variable_getter(lambda v: v * 3.0, classes=[snt.Linear]):
        tripled = mod(tf.ones([1, 3]))
    with snt.custom_variable_getter(lambda v: v * 0.0, instances=[snt.Linear(2)]):
        unchanged = mod(tf.ones([1, 3]))
    return doubled, tripled, unchanged


def _custom_optimizer():
    class Halve(snt.Optimizer):
        def apply(self, updates, parameters):
            for u, p in zip(updates, parameters):
                p.assign_sub(0.5 * u)

    p = tf.Variable([1.0, 2.0])
    opt = Halve()
    opt.apply([tf.constant([1.0, 1.0])], [p])
    return p, opt.name


class _CountingMetric(snt.Metric):
    """A user metric that implements only initialize/reset/update."""

    def __init__(self, name=None):
        super().__init__(name=name)
        self._total = None

    @snt.once
    def initialize(self, value):
        self._total = tf.Variable(tf.zeros_like(value), trainable=False, name="total")

    def reset(self):
        self._total.assign(tf.zeros_like(self._total))

    def update(self, value):
        self.initialize(value)
        self._total.assign(0.5 * self._total + 0.5 * value)

    @property
    def value(self):
        return self._total.read_value()


def _custom_metric_batch_norm():
    bn = snt.BaseBatchNorm(
        create_scale=True,
        create_offset=True,
        moving_mean=_CountingMetric(name="mean"),
        moving_variance=_CountingMetric(name="variance"),
    )
    x = tf.reshape(tf.range(24, dtype=tf.float32) / 10.0, (6, 4))
    train = bn(x, is_training=True)
    test = bn(x, is_training=False)
    return train, test, bn


def _custom_metric_alone():
    m = _CountingMetric()
    m(tf.constant([2.0, 4.0]))
    m.update(tf.constant([4.0, 0.0]))
    value = m.value
    m.reset()
    return value, m.value, m


def _wrapt_method(h, mode):
    @wrapt.decorator
    def doubled(wrapped, instance, args, kwargs):
        return 2.0 * wrapped(*args, **kwargs)

    class Scaled(snt.Module):
        @doubled
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(tf.fill([x.shape[-1]], 1.5), name="w")
            return x * self.w

        @doubled
        def other(self, x):
            return x + 1.0

    mod = Scaled()
    call = h.traced(lambda x: (mod(x), mod.other(x)), mode)
    return call(tf.ones([2])), mod


def _wraps_method(h, mode):
    def logged(f):
        @functools.wraps(f)
        def wrapper(self, *args, **kwargs):
            return f(self, *args, **kwargs) + 1.0

        return wrapper

    class M(snt.Module):
        @logged
        def __call__(self, x):
            if not hasattr(self, "w"):
                self.w = tf.Variable(2.0, name="w")
            return x * self.w

    mod = M()
    out = h.traced(lambda x: mod(x), mode)(tf.ones([2]))
    return out, mod


class _Accumulator(snt.RNNCore):
    """A user RNN core with a single-tensor state."""

    def __init__(self, size, name=None):
        super().__init__(name=name)
        self._size = size

    def __call__(self, inputs, prev_state):
        if not hasattr(self, "w"):
            self.w = tf.Variable(tf.fill([inputs.shape[-1], self._size], 0.1), name="w")
        out = tf.tanh(tf.matmul(inputs, self.w) + prev_state)
        return out * 2.0, out

    def initial_state(self, batch_size):
        return tf.zeros([batch_size, self._size])


class _NestedCore(snt.RNNCore):
    """A user RNN core with a nested state and a dict output."""

    def __call__(self, inputs, prev_state):
        count, (total, last) = prev_state
        total = total + tf.reduce_sum(inputs, axis=-1, keepdims=True)
        return {"total": total, "x": inputs}, (count + 1, (total, inputs))

    def initial_state(self, batch_size):
        return (
            tf.zeros([batch_size], tf.int32),
            (tf.zeros([batch_size, 1]), tf.zeros([batch_size, 4])),
        )


def _custom_core(h, unroll, mode):
    core = _Accumulator(3)
    xs = tf.constant(h.ramp((3, 2, 4)))

    def run(xs):
        return getattr(snt, unroll)(
            core, xs, core.initial_state(2), sequence_length=tf.constant([2, 3])
        )

    return h.traced(run, mode)(xs), core


def _nested_core(h, unroll, mode):
    core = _NestedCore()
    xs = tf.constant(h.ramp((3, 2, 4)))
    return h.traced(
        lambda xs: getattr(snt, unroll)(core, xs, core.initial_state(2)), mode
    )(xs)


def _custom_initializer():
    class Arange(snt.initializers.Initializer):
        def __call__(self, shape, dtype):
            n = int(np.prod(shape))
            return tf.reshape(tf.range(n, dtype=dtype), shape)

    mod = snt.Linear(2, w_init=Arange(), b_init=Arange())
    return mod(tf.ones([1, 3])), mod


def _autograph_control_flow():
    mod = snt.Linear(2, w_init=snt.initializers.Constant(0.5))

    @tf.function
    def f(x, n):
        total = tf.zeros([1, 2])
        for _ in tf.range(n):
            if tf.reduce_sum(total) > 3.0:
                total += mod(x) * 0.5
            else:
                total += mod(x)
        return total

    return f(tf.ones([1, 3]), tf.constant(4)), mod


def _unknown_batch_mlp():
    mlp = snt.nets.MLP([3, 2], w_init=snt.initializers.Constant(0.1))
    f = tf.function(mlp, input_signature=[tf.TensorSpec([None, 4])])
    return f(tf.ones([5, 4])), f(tf.ones([1, 4])), mlp


def _unknown_rank_linear():
    mod = snt.Linear(2)
    f = tf.function(mod, input_signature=[tf.TensorSpec(None)])
    return f(tf.ones([5, 4]))


def _module_tf_function_method():
    class M(snt.Module):
        def __init__(self):
            super().__init__()
            self.lin = snt.Linear(2, w_init=snt.initializers.Constant(0.5))

        @tf.function
        def __call__(self, x):
            return self.lin(x)

    m = M()
    return m(tf.ones([2, 3])), m


class _LazyParts(snt.Module):
    """A user module that makes submodules and a scope on its first call."""

    @snt.once
    def _initialize(self, x):
        self.first = snt.Linear(3)
        self.second = snt.Linear(3)
        with tf.name_scope("inner"):
            self.inner = snt.Linear(2)
        self.scale = tf.Variable(tf.ones([x.shape[-1]]), name="scale")

    def __call__(self, x):
        self._initialize(x)
        y = self.first(x * self.scale) + self.second(x)
        return y + tf.reduce_sum(self.inner(x))


def _lazy_submodules_in_one_trace():
    # Two such modules first called in one `tf.function`: the graph makes
    # their scope names unique (`parts/linear_2/...`); variables' own names
    # are not; eagerly, names repeat.
    a, b = _LazyParts(name="parts"), _LazyParts(name="parts")
    x = tf.ones([2, 4])
    tf.function(lambda x: a(x) + b(x))(x)
    c = _LazyParts(name="parts")
    c(x)
    return [sorted(v.name for v in m.variables) for m in (a, b, c)]
