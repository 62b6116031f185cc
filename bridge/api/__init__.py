"""TF 2's public namespaces over the rooms below (TF's generated ``tensorflow/_api/v2``).

``namespaces`` holds ``bridge.math``, ``bridge.linalg`` and ``bridge.random``:
TF's names for functions of ``bridge.ops`` and ``bridge.nn``.  They sit above
both rooms, as TF's ``tf.math`` sits above ``tensorflow/python/ops`` (whose
``nn_ops`` and ``random_ops`` live in ``bridge/nn`` here), so that ``ops``
never names a module of ``nn``.
"""
