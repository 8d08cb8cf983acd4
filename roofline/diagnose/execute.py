"""Running the user's model once, the same way in the counting and the timing pass."""

from __future__ import annotations

import traceback
from typing import Any, Literal

from roofline.errors import UserCodeError

Mode = Literal["inference", "training"]


def user_traceback(exc: BaseException, user_file: str | None = None) -> str:
    """The traceback of ``exc`` with our own frames dropped: from the first frame outside the roofline package
    (the user's code), or the whole chain when none is found."""
    frames = traceback.extract_tb(exc.__traceback__)
    keep = [
        f
        for f in frames
        if "/roofline/" not in f.filename.replace("\\", "/") or (user_file and f.filename == user_file)
    ]
    lines = ["Traceback (most recent call last):\n", *traceback.format_list(keep or frames)]
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def _floating_tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value] if value.is_floating_point() and value.requires_grad else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _floating_tensors(item)]
    return [getattr(value, name) for name in ("loss", "logits") if hasattr(value, name)][:1]


def run_once(model: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any], mode: Mode) -> Any:
    """One forward (inference: under no_grad) or forward + backward of the sum of the outputs (training).

    An exception from the user's model, sys.exit() included, becomes a UserCodeError carrying their traceback
    (exit 1); Ctrl-C (KeyboardInterrupt) goes on up."""
    import torch

    try:
        if mode == "inference":
            with torch.no_grad():
                return model(*inputs, **kwargs)
        out = model(*inputs, **kwargs)
        tensors = _floating_tensors(out)
        if not tensors:
            raise UserCodeError("--mode training: the model's output has no floating tensor that requires grad")
        loss = sum(t.float().sum() for t in tensors)
        loss.backward()
        return out
    except UserCodeError:
        raise
    except torch.cuda.OutOfMemoryError:
        raise
    except SystemExit as exc:  # NB: sys.exit() in forward must not end (or pass) the run as if it had measured
        raise UserCodeError(
            f"the model exited while running (SystemExit: {exc.code}): a forward must return", user_traceback(exc)
        ) from None
    except Exception as exc:
        raise UserCodeError(f"the model raised {type(exc).__name__}: {exc}", user_traceback(exc)) from None


__all__ = ["Mode", "run_once", "user_traceback"]
