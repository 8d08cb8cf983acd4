"""Console rendering of `roofline analyze tile`: one card (every quantity on its own line) and its assumptions."""

from __future__ import annotations

from roofline.costs.tile import TileResult, assumptions
from roofline.device import Device
from roofline.render.base import Renderer
from roofline.units import format_bytes


def _b(value: int) -> str:
    return f"{value:,} B"


class TileRenderer(Renderer):
    def __init__(self, device: Device) -> None:
        self.device = device

    def render(self, value: TileResult) -> str:
        r, unit = value, self.device.unit_name
        terms = ", ".join(f"{name} {_b(size)}" for name, size in r.smem.items())
        reserve = f" + {_b(r.reserved_smem_bytes)} reserved" if r.reserved_smem_bytes else ""
        per_sm_blocks = ", ".join(f"{name} {count:,}" for name, count in r.limits.items())
        if r.fits:
            fits = "yes"
            bound = f"{r.blocks_per_sm}, bound by {' and '.join(r.binding)} ({per_sm_blocks})"
        else:
            fits = "no: " + "; ".join(r.does_not_fit)
            bound = "0: the tile does not fit"
        fields = [
            (
                "shared mem",
                f"{_b(r.smem_bytes)} = {format_bytes(r.smem_bytes)} ({terms}){reserve}; limit "
                f"{_b(r.smem_limit_per_block_bytes)} per block, {_b(r.smem_per_sm_bytes)} per {unit}",
            ),
            (
                "registers",
                f"{r.registers_per_thread} per thread ({r.acc_registers_per_thread} accumulator + "
                f"{r.spec.other_regs} other) x {r.threads} threads = {r.registers_per_block:,} of "
                f"{r.registers_per_sm:,} per {unit}",
            ),
            ("fits", fits),
            (f"blocks/{unit}", bound),
            ("occupancy", f"{r.occupancy:.1%} ({r.warps_per_sm} of {r.max_warps_per_sm} warps per {unit})"),
        ]
        if r.problem is not None:
            if r.waves is None:
                fields.append(("waves", f"none ({r.problem}): the tile does not fit"))
            else:
                w = r.waves
                fields.append(
                    (
                        "waves",
                        f"{w.tiles:,} tiles ({r.problem}) / ({r.blocks_per_sm} per {unit} x {r.sms} {unit}s = "
                        f"{w.slots:,} slots) = {w.exact:.2f} -> {w.waves:,} wave{'s' if w.waves != 1 else ''}; "
                        f"last wave {w.last_wave_full:.1%} full; efficiency {w.efficiency:.1%}",
                    )
                )
        lines = [f"{r.spec.label()} on {self.device.display_name} ({self.device.name})"]
        lines += [f"  {name:<12} {text}" for name, text in fields]
        lines.append("")
        lines.append("Assumptions: " + "; ".join([*assumptions(r.spec), *r.notes]))
        return "\n".join(lines) + "\n"
