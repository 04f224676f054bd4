"""One optimizer step of the encoder trainer, and what it runs with.

The AdamW optimizer and the autocast precision; the encoder's forward over a micro-batch's length pieces and
that micro-batch's loss; forward and backward of a step's micro-batches (`accumulate_gradients`), then clipping
and the optimizer step (`clip_and_step`). `models/train_encoder.py` calls them in this order.
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
    """The precision a run trains in: fp32 on a CPU; on a GPU `requested`, where auto is bf16 if the GPU has it,
    else fp16."""
    import torch

    if not cuda:
        return "fp32"
    if requested == "auto":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return requested


def piecewise(encoder, pooling: str, normalize: bool = False):
    """A module running `encoder` on each (input_ids, attention_mask) part and returning the pooled vectors in
    the micro-batch's order: the parts go through one module call, so DDP sees one forward per backward."""
    import torch

    from models.encoder import pool

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


def micro_batch_loss(ddp, loss, precision: str, device, accumulation: int):
    """The loss of one collated micro-batch (queries, positives, negatives), scaled for accumulation."""
    import torch

    autocast = dict(
        device_type="cuda",
        dtype=torch.bfloat16 if precision == "bf16" else torch.float16,
        enabled=precision in ("bf16", "fp16"),
    )

    def micro_loss(part):
        pieces, inverse = part
        pieces = [tuple(t.to(device, non_blocking=True) for t in piece) for piece in pieces]
        with torch.autocast(**autocast):
            vectors = ddp(pieces, inverse.to(device, non_blocking=True)).float()
        n = len(vectors) // 3
        return loss(vectors[:n], vectors[n : 2 * n], vectors[2 * n :]) / accumulation

    return micro_loss


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
