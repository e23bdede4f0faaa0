"""``koordctl whatif``'s table (kubectl's default output) and ``-o wide`` (more columns, then the
members' nodes, the victims and every change found)."""

from __future__ import annotations

from scheduler.whatif.answer import MemberPlacement, WhatIfAnswer

__all__ = ["render_table"]


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _columns(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def render_table(answer: WhatIfAnswer, *, wide: bool = False) -> str:
    after = answer.after_preemption
    fits_after = answer.fits_now.fits or (after is not None and after.fits)
    header = ["JOB", "MEMBERS", "FITS NOW", "AFTER PREEMPTION", "LARGEST NOW", "BLOCKER", "SMALLEST CHANGE"]
    row = [
        answer.job,
        f"{answer.members} (min {answer.min_member})",
        _yes(answer.fits_now.fits),
        _yes(fits_after) if answer.fits_now.fits or after is not None else "-",
        str(answer.largest.members_now),
        answer.blocker.kind if answer.blocker is not None else "-",
        answer.smallest_change.description if answer.smallest_change is not None else "-",
    ]
    if wide:
        header += ["QUOTA", "VICTIMS", "LARGEST WITH PREEMPTION", "GPU PER POD NOW"]
        row += [
            f"{answer.fits_now.quota} ({'fits' if answer.fits_now.quota_fits else 'full'})"
            if answer.fits_now.quota
            else "-",
            str(len(after.victims)) if after is not None and after.fits else "-",
            str(answer.largest.members_with_preemption)
            if answer.largest.members_with_preemption is not None
            else "-",
            f"{answer.largest.gpu_per_pod_now} {answer.largest.gpu_resource}"
            if answer.largest.gpu_resource
            else "-",
        ]
    out = [_columns([header, row])]
    if not wide:
        return out[0]
    if answer.blocker is not None:
        out.append(f"\nBlocker: {answer.blocker.message}")
    if answer.fits_now.placements:
        out.append("\nPlacement now:\n" + _placements(answer.fits_now.placements))
    if after is not None:
        out.append(f"\nAfter preemption: {after.message}")
        if after.victims:
            rows = [["VICTIM", "NODE", "PRIORITY", "JOB", "QUOTA"]] + [
                [v.pod, v.node, str(v.priority), v.job, v.quota or "-"] for v in after.victims
            ]
            out.append(_columns(rows))
        if after.placements:
            out.append(_placements(after.placements))
    changes = [c for c in (answer.smallest_change, *answer.alternatives) if c is not None]
    if changes:
        rows = [["CHANGE", "KIND", "CHECKED PLACEMENT"]] + [
            [c.description, c.kind, ", ".join(sorted({p.node for p in c.placements}))] for c in changes
        ]
        out.append("\n" + _columns(rows))
    for note in answer.notes:
        out.append(f"Note: {note}")
    return "\n".join(out)


def _placements(placements: list[MemberPlacement]) -> str:
    rows = [["POD", "NODE", "DOMAIN"]] + [
        [p.pod, p.node, " ".join(f"{layer}={value}" for layer, value in p.domain.items()) or "-"]
        for p in placements
    ]
    return _columns(rows)
