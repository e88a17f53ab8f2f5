#!/usr/bin/env python3
"""Figures of a testbed results file, drawn with matplotlib (Agg, no display).

Called by `testbed plot results/x.h5 [-o DIR]`, which reads the file with the testbed's own
reader and hands it over as JSON: `plot.py DIR/plot_data.json DIR`. Writes, as PNG and SVG:

- <experiment>_main: the main metric (or, when the experiment gives the paper's figures, the
  speedup over the first arm) per arm and point as grouped bars, the paper's figure marked
  beside ours;
- <experiment>_devices_<run>: for simulated runs, each device's compute, exposed
  communication and idle time, and its memory peak against its capacity;
- <experiment>_loss: for real runs, the loss curve of every arm (and of single-process
  training of the same model when the run compared with it);
- <experiment>_moe_<run>: the balance degree (standard deviation of tokens per rank)
  without and with the balancer, per iteration and per MoE layer;
- <experiment>_features_<run>: for GNN feature loading, the bytes copied host to device and
  the bytes the batches read, per iteration;
- <experiment>_precision_<run>: the bit widths of each layer.

Titles, axis labels and units come from the file. Exit status 2 when matplotlib is missing.
"""
import json
import math
import os
import re
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in SVG (searchable, smaller)
    import matplotlib.pyplot as plt
except ImportError:
    sys.stderr.write("error: matplotlib is not installed for %s (Debian: apt install python3-matplotlib; "
                     "scripts/install-deps.sh installs it)\n" % sys.executable)
    sys.exit(2)

MAX_DEVICE_FIGURES = 12  # figures of one kind drawn at most per file (its first runs)


def safe(name):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def save(fig, out_dir, name, written):
    for ext in ("png", "svg"):
        path = os.path.join(out_dir, "%s.%s" % (safe(name), ext))
        fig.savefig(path, dpi=120, bbox_inches="tight")
        written.append(path)
    plt.close(fig)


def table(run, name):
    for t in run["tables"]:
        if t["name"] == name:
            return {c["name"]: c for c in t["columns"]}
    return None


def metric(run, name):
    m = run["metrics"].get(name)
    return None if m is None or m[0] is None else m[0]


def main_figure(data, out_dir, written):
    runs = [r for r in data["runs"] if r["status"] == "ok"]
    if not runs:
        return
    arms = [a for a in data["arms"] if any(r["arm"] == a for r in runs)]
    points = []
    for r in data["runs"]:
        if r["point"] not in points:
            points.append(r["point"])
    refs = {(x["arm"], x["point"]): x["value"] for x in data["references"]}
    name = data["metric"]
    unit = next((r["metrics"][name][1] for r in runs if name in r["metrics"]), "")
    by = {(r["arm"], r["point"]): r for r in runs}
    speedup = bool(refs) and data["reference_metric"] == "speedup"
    first = data["arms"][0] if data["arms"] else None

    def value(arm, point):
        r = by.get((arm, point))
        if r is None:
            return None
        v = metric(r, name)
        if v is None or not speedup:
            return v
        base = by.get((first, point))
        b = metric(base, name) if base else None
        if not b:
            return None
        lower = name.endswith("_s") and "per_s" not in name
        return b / v if lower else v / b

    fig, ax = plt.subplots(figsize=(min(16, max(6, 0.3 * len(points) * max(1, len(arms)) + 2)), 4.5))
    width = 0.8 / max(1, len(arms))
    for i, arm in enumerate(arms):
        xs, ys = [], []
        for j, p in enumerate(points):
            v = value(arm, p)
            if v is not None:
                xs.append(j + (i - (len(arms) - 1) / 2) * width)
                ys.append(v)
        ax.bar(xs, ys, width, label=arm)
        px = [j + (i - (len(arms) - 1) / 2) * width for j, p in enumerate(points) if (arm, p) in refs]
        py = [refs[(arm, p)] for p in points if (arm, p) in refs]
        if px:
            ax.scatter(px, py, marker="_", s=400, color="black", linewidths=2, zorder=3,
                       label="paper" if i == next(k for k, a in enumerate(arms) if any((a, q) in refs for q in points)) else None)
    ax.set_xticks(range(len(points)))
    ax.set_xticklabels([p if p else "(one point)" for p in points], rotation=30 if len(points) > 4 else 0, ha="right" if len(points) > 4 else "center")
    if speedup:
        ax.set_ylabel("speedup over %s (%s)" % (first, name))
        ax.axhline(1.0, color="grey", linewidth=0.8)
    else:
        ax.set_ylabel("%s [%s]" % (name, unit) if unit else name)
    ax.set_title("%s\n%s" % (data["experiment"], data["paper"]) if data["paper"] else data["experiment"], fontsize=10)
    ax.legend(fontsize=8, ncol=min(4, len(arms) + 1))
    save(fig, out_dir, "%s_main" % data["experiment"], written)


def device_figures(data, out_dir, written):
    drawn = 0
    for r in data["runs"]:
        t = table(r, "per_device")
        if r["status"] != "ok" or t is None or drawn >= MAX_DEVICE_FIGURES:
            continue
        drawn += 1
        n = len(t["device"]["values"])
        xs = list(range(n))
        # Wide enough for a bar per device up to ~100 devices; beyond that the bars get thinner.
        fig, (ax, mem) = plt.subplots(2, 1, figsize=(min(24, max(6, 0.25 * n)), 6), sharex=True)
        bottom = [0.0] * n
        for col, label in (("compute_s", "compute"), ("exposed_comm_s", "exposed communication"), ("idle_s", "idle")):
            if col not in t:
                continue
            v = [x or 0.0 for x in t[col]["values"]]
            ax.bar(xs, v, bottom=bottom, label=label, width=0.9)
            bottom = [b + x for b, x in zip(bottom, v)]
        ax.set_ylabel("time over the run [s]")
        ax.legend(fontsize=8)
        ax.set_title("%s: %s, per device" % (data["experiment"], r["id"]), fontsize=10)
        if "memory_peak_bytes" in t:
            gib = [(x or 0.0) / 2**30 for x in t["memory_peak_bytes"]["values"]]
            mem.bar(xs, gib, width=0.9, color="tab:purple", label="memory peak")
            cap = metric(r, "memory_capacity_gib")
            if cap:
                mem.axhline(cap, color="red", linestyle="--", linewidth=1, label="capacity")
            mem.set_ylabel("memory [GiB]")
            mem.legend(fontsize=8)
        mem.set_xlabel("device")
        save(fig, out_dir, "%s_devices_%s" % (data["experiment"], r["id"]), written)


def loss_figure(data, out_dir, written):
    curves = [(r, table(r, "loss_curve")) for r in data["runs"] if r["status"] == "ok"]
    curves = [(r, t) for r, t in curves if t is not None and "loss" in t]
    if not curves:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    unit = curves[0][1]["loss"]["unit"]
    single = None
    for r, t in curves:
        steps = t["step"]["values"] if "step" in t else list(range(len(t["loss"]["values"])))
        ax.plot(steps, t["loss"]["values"], label=r["id"])
        if "single_process_loss" in t and single is None:
            single = (steps, t["single_process_loss"]["values"])
    if single is not None:  # on top: the arms it checks lie under it
        ax.plot(single[0], single[1], "k--", linewidth=1, label="single process", zorder=5)
    ax.set_xlabel("step")
    ax.set_ylabel("loss [%s]" % unit if unit else "loss")
    ax.set_title("%s: training loss" % data["experiment"], fontsize=10)
    ax.legend(fontsize=8)
    save(fig, out_dir, "%s_loss" % data["experiment"], written)


def moe_figures(data, out_dir, written):
    drawn = 0
    for r in data["runs"]:
        t = table(r, "moe_balance")
        if r["status"] != "ok" or t is None or drawn >= MAX_DEVICE_FIGURES:
            continue
        drawn += 1
        fig, (by_step, by_layer) = plt.subplots(1, 2, figsize=(12, 4))
        unit = t["balance_degree_before"]["unit"]
        cols = [(c, l) for c, l in (("balance_degree_before", "no balancer"), ("balance_degree_after", "with the balancer"))
                if c in t]
        # Per iteration, the mean over the MoE layers; per MoE layer, the mean over iterations.
        for key, ax, label in (("iteration", by_step, "iteration"), ("layer", by_layer, "MoE layer (model layer index)")):
            keys = t[key]["values"]
            order = sorted(set(keys))
            for k, (col, name) in enumerate(cols):
                sums, counts = {}, {}
                for i, v in zip(keys, t[col]["values"]):
                    sums[i] = sums.get(i, 0.0) + (v or 0.0)
                    counts[i] = counts.get(i, 0) + 1
                means = [sums[i] / counts[i] for i in order]
                if key == "iteration":
                    ax.plot(order, means, label=name)
                else:
                    xs = list(range(len(order)))
                    ax.bar([x + (k - 0.5) * 0.4 for x in xs], means, 0.4, label=name)
                    ax.set_xticks(xs)
                    ax.set_xticklabels([str(o) for o in order], fontsize=7)
            ax.set_xlabel(label)
            ax.set_ylabel("balance degree [%s]" % unit, fontsize=8)
            ax.legend(fontsize=8)
        by_step.set_title("per iteration (mean over MoE layers)", fontsize=9)
        by_layer.set_title("per MoE layer (mean over iterations)", fontsize=9)
        fig.suptitle("%s: %s, tokens per rank, standard deviation" % (data["experiment"], r["id"]), fontsize=10)
        save(fig, out_dir, "%s_moe_%s" % (data["experiment"], r["id"]), written)


def feature_figures(data, out_dir, written):
    drawn = 0
    for r in data["runs"]:
        t = table(r, "feature_steps")
        if r["status"] != "ok" or t is None or drawn >= MAX_DEVICE_FIGURES:
            continue
        drawn += 1
        steps = t["iteration"]["values"]
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.plot(steps, [(v or 0.0) / 2**20 for v in t["input_bytes"]["values"]], label="features the batches read")
        ax.plot(steps, [(v or 0.0) / 2**20 for v in t["copy_bytes"]["values"]], label="copied host to device")
        ax.set_xlabel("iteration")
        ax.set_ylabel("MiB per iteration (all replicas)")
        ax.set_ylim(bottom=0)
        ax.set_title("%s: %s, feature transfer per step" % (data["experiment"], r["id"]), fontsize=10)
        ax.legend(fontsize=8)
        save(fig, out_dir, "%s_features_%s" % (data["experiment"], r["id"]), written)


def precision_figures(data, out_dir, written):
    drawn = 0
    for r in data["runs"]:
        t = table(r, "layer_precision")
        if r["status"] != "ok" or t is None or drawn >= MAX_DEVICE_FIGURES:
            continue
        drawn += 1
        names = t["layer"]["values"]
        xs = list(range(len(names)))
        fig, ax = plt.subplots(figsize=(min(16, max(6, 0.35 * len(names))), 4))
        for k, (col, label) in enumerate((("weight_bits", "weights"), ("activation_bits", "activations"),
                                          ("gradient_bits", "gradients"))):
            if col in t:
                ax.bar([x + (k - 1) * 0.27 for x in xs], t[col]["values"], 0.27, label=label)
        every = max(1, len(names) // 24)
        ax.set_xticks(xs[::every])
        ax.set_xticklabels(names[::every], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("bits")
        ax.set_title("%s: %s, bit widths per layer" % (data["experiment"], r["id"]), fontsize=10)
        ax.legend(fontsize=8)
        save(fig, out_dir, "%s_precision_%s" % (data["experiment"], r["id"]), written)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: plot.py plot_data.json OUT_DIR (run by `testbed plot`)\n")
        return 1
    with open(argv[1]) as f:
        data = json.load(f)
    out_dir = argv[2]
    os.makedirs(out_dir, exist_ok=True)
    written = []
    main_figure(data, out_dir, written)
    device_figures(data, out_dir, written)
    loss_figure(data, out_dir, written)
    moe_figures(data, out_dir, written)
    feature_figures(data, out_dir, written)
    precision_figures(data, out_dir, written)
    for path in written:
        print(path)
    if not written:
        sys.stderr.write("no figures: the file has no completed run\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
