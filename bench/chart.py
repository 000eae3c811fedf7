"""Draw a results JSON of bench/run as a PNG: per case, one bar per sandbox
platform giving its median time relative to native (log scale; 1 = as fast
as native), with a tick at the ratio of the minimums. A platform on which a
case did not run gets its status ("unsupported", "crashed", "timeout") where
its bar would be; the reason is in the table and the JSON.

Usage: chart.py RESULTS.json OUT.png  (bench/run calls it in bench/.venv,
where matplotlib is installed.)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"cordon": "#d95f02", "runsc-systrap": "#1b9e77", "runsc-ptrace": "#7570b3"}


def main(src: str, dst: str) -> None:
    doc = json.load(open(src))
    plats = [p for p in doc["platforms"] if p != "native"]
    cases = doc["cases"]
    if not plats or "native" not in doc["platforms"]:
        sys.exit("chart: need native and at least one sandbox platform")

    fig, ax = plt.subplots(figsize=(max(8, 0.2 * len(cases) * (len(plats) + 1) + 2), 6), dpi=110)
    width = 0.8 / len(plats)
    ratios = [c["results"][p].get("ratio_median") for c in cases for p in plats]
    known = [r for r in ratios if r]
    floor = min([0.5] + known) / 1.5
    for j, p in enumerate(plats):
        xs, hs, mins, missing = [], [], [], []
        for i, c in enumerate(cases):
            x = i - 0.4 + width * (j + 0.5)
            r = c["results"][p]
            if r.get("ratio_median"):
                xs.append(x)
                hs.append(r["ratio_median"])
                mins.append(r["ratio_min"])
            else:
                missing.append((x, r["status"] if r["status"] != "ok" else "no native"))
        ax.bar(xs, [h - floor for h in hs], width, bottom=floor, label=p, color=COLORS.get(p, None))
        ax.scatter(xs, mins, marker="_", color="black", s=60, zorder=3, linewidths=1)
        for x, why in missing:
            ax.text(x, floor * 1.15, why, rotation=90, ha="center", va="bottom", fontsize=8,
                    color=COLORS.get(p, "grey"))
    ax.set_yscale("log")
    ax.set_ylim(floor, max([10] + known) * 4)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c["name"] for c in cases], rotation=40, ha="right")
    ax.set_xlim(-0.6, len(cases) - 0.4)
    ax.set_ylabel("time relative to native (median over rounds; log)")
    ax.grid(axis="y", which="major", alpha=0.3)
    m = doc["meta"]
    ax.set_title(f"cordon benchmarks, {m['date']}: {m['rounds']} interleaved round(s)\n{m['machine']}", fontsize=9)
    ax.legend(title="bar: ratio of medians; tick: ratio of minimums", fontsize=8, title_fontsize=8,
              loc="upper right", ncol=len(plats))
    fig.tight_layout()
    fig.savefig(dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
