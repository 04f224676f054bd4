"""A tiny encoder (a few seconds per epoch on a CPU) for the e2e tests that train one."""

TINY = [
    "train_encoder.hidden_size=64",
    "train_encoder.layers=2",
    "train_encoder.heads=2",
    "train_encoder.vocab_size=4000",
    "train_encoder.max_length=64",
    "train_encoder.per_device_batch=32",
]
