"""One optimizer step of the encoder trainer, and what it runs with.

The AdamW optimizer and the autocast precision (bf16 on a CPU that has it); the encoder's forward over a
micro-batch's length pieces and that micro-batch's loss; forward and backward of a step's micro-batches
(`accumulate_gradients`, or `cached_step_gradients` for a loss over the whole step), then clipping and the
optimizer step (`clip_and_step`). `models/training/train.py` calls them in this order.
"""

from __future__ import annotations

import contextlib


def adamw(model, lr: float, weight_decay: float, *, fused: bool = False):
    """AdamW with weight decay on every trained weight but biases and LayerNorm (BERT's recipe).

    `fused`: one kernel for the whole update instead of several per parameter group (the trainer asks for it
    on CUDA; PyTorch has a fused CPU kernel too, used by the tests of this path).
    """
    import torch

    def exempt(name: str) -> bool:
        return name.endswith("bias") or "LayerNorm" in name

    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    return torch.optim.AdamW(
        [
            {"params": [p for n, p in trained if not exempt(n)], "weight_decay": weight_decay},
            {"params": [p for n, p in trained if exempt(n)], "weight_decay": 0.0},
        ],
        lr=lr,
        fused=fused or None,
    )


def resolve_precision(requested: str, cuda: bool) -> str:
    """The precision a run trains in. On a GPU `requested`, where auto is bf16 if the GPU has it, else fp16. On a
    CPU, auto is bf16 where the CPU has bf16 instructions (`cpu_has_bf16`: AVX512-BF16 or AMX, where bf16
    autocast trains MiniLM about 1.7x faster than fp32), else fp32; bf16 is kept as asked; fp16, which a CPU
    gains nothing from, is fp32."""
    import torch

    if not cuda:
        if requested == "auto":
            return "bf16" if cpu_has_bf16() else "fp32"
        return "bf16" if requested == "bf16" else "fp32"
    if requested == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return requested


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX): PyTorch's own probes, else /proc/cpuinfo's
    flags. Without them bf16 autocast is emulated and slower than fp32."""
    import torch

    probes = getattr(torch._C, "_cpu", None)
    for name in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        probe = getattr(probes, name, None)
        if probe is not None:
            try:
                if probe():
                    return True
            except RuntimeError:
                pass
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def autocast_settings(precision: str, device) -> dict:
    """`torch.autocast`'s arguments for `precision` on `device` (a CPU autocasts to bf16 only)."""
    import torch

    return dict(
        device_type=device.type,
        dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
        enabled=precision in ("bf16", "fp16"),
    )


def piecewise(encoder, pooling: str, normalize: bool = False):
    """A module running `encoder` on each (input_ids, attention_mask) part and returning the pooled vectors in
    the micro-batch's order: the parts go through one module call, so DDP sees one forward per backward."""
    import torch

    from citeflow.models.encoder.model import pool

    class Piecewise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = encoder

        def forward(self, pieces, inverse):
            vectors = [
                pool(self.encoder(input_ids=i, attention_mask=m).last_hidden_state, m, pooling, normalize)
                for i, m in pieces
            ]
            return torch.cat(vectors)[inverse]

    return Piecewise()


def micro_batch_vectors(ddp, precision: str, device):
    """The float32 vectors of one collated micro-batch (queries, then positives, then negatives)."""
    import torch

    autocast = autocast_settings(precision, device)

    def vectors_of(part):
        pieces, inverse = part
        pieces = [tuple(t.to(device, non_blocking=True) for t in piece) for piece in pieces]
        with torch.autocast(**autocast):
            return ddp(pieces, inverse.to(device, non_blocking=True)).float()

    return vectors_of


def micro_batch_loss(ddp, loss, precision: str, device, accumulation: int):
    """The loss of one collated micro-batch (queries, positives, negatives), scaled for accumulation."""
    vectors_of = micro_batch_vectors(ddp, precision, device)

    def micro_loss(part):
        vectors = vectors_of(part)
        n = len(vectors) // 3
        return loss(vectors[:n], vectors[n : 2 * n], vectors[2 * n :]) / accumulation

    return micro_loss


def cached_step_gradients(model, parts, vectors_of, loss, scaler=None):
    """The gradients of one loss over every micro-batch of the step, in GradCache's way (Gao et al. 2021):
    the vectors of each micro-batch without a graph, the loss over all of them and its gradient with respect to
    each vector, then each micro-batch again with a graph, its vectors' backward fed that cached gradient.

    For a loss whose rows compete with each other (`in_batch`: every positive and negative of the step is a
    candidate for every query), accumulation would otherwise shrink the candidates to one micro-batch's. The
    price is a second forward of each micro-batch. Dropout draws the same masks in both forwards (each
    micro-batch's RNG state is kept and restored). Returns the step's loss as a float64 tensor, not read back.
    """
    import torch

    def rng_state():
        return torch.get_rng_state(), (torch.cuda.get_rng_state() if torch.cuda.is_available() else None)

    def restore(state):
        torch.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state(state[1])

    states, cached = [], []
    with torch.no_grad():
        for part in parts:
            states.append(rng_state())
            cached.append(vectors_of(part))
    leaves = [v.detach().requires_grad_() for v in cached]
    thirds = [torch.cat([v[k * (len(v) // 3) : (k + 1) * (len(v) // 3)] for v in leaves]) for k in range(3)]
    total = loss(*thirds)
    (scaler.scale(total) if scaler else total).backward()
    distributed = isinstance(model, torch.nn.parallel.DistributedDataParallel)
    for i, (part, leaf, state) in enumerate(zip(parts, leaves, states, strict=True)):
        last = i == len(parts) - 1
        with model.no_sync() if distributed and not last else contextlib.nullcontext():
            restore(state)
            vectors_of(part).backward(leaf.grad)
    return total.detach().double()


def accumulate_gradients(model, parts, loss_of, scaler=None):
    """Forward and backward of each micro-batch in `parts`; returns the summed (already scaled) loss.

    The sum is a float64 tensor on the loss's device: reading it (`.item()`) would wait for the device, so
    the caller reads losses back only every few steps.

    A DistributedDataParallel model decides in its forward whether the following backward all-reduces, so
    every micro-step but the last runs forward *and* backward inside `no_sync()`: one all-reduce per
    optimizer step, not one per micro-batch.
    """
    import torch

    total = None
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        distributed = isinstance(model, torch.nn.parallel.DistributedDataParallel)
        with model.no_sync() if distributed and not last else contextlib.nullcontext():
            loss = loss_of(part)
            (scaler.scale(loss) if scaler else loss).backward()
        value = loss.detach().double()
        total = value if total is None else total + value
    return total


def clip_and_step(model, optimizer, scaler, max_grad_norm: float):
    """Unscale (fp16), clip the global gradient norm at `max_grad_norm` (0: no clipping), step.

    Returns the norm before clipping as a tensor on the device, not read back (inf or nan when an fp16 step
    overflowed; the scaler then skips it).
    """
    import torch

    if scaler:
        scaler.unscale_(optimizer)
    limit = max_grad_norm if max_grad_norm > 0 else float("inf")
    norm = torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], limit)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return norm.detach()
