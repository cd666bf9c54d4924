#!/usr/bin/env python3
"""Writes the FABRIK tech report's test models (§4.1, figure 4.1) as Sinew problem files.

    python3 tests/data/paper_models_gen.py      # rewrites tests/data/paper_*.json

Units are millimetres, axes Blender's (Z up, the character faces -Y). See paper_models.md for
what each model is and how the paper's joint counts were read. Targets of the tree models are
forward kinematics of a known pose, so they are reachable (and, for the constrained humanoid,
reachable inside the limits); this script needs nothing beyond the standard library.
"""

import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEG = math.pi / 180.0


# --- quaternions (w, x, y, z) ---------------------------------------------------------------

def qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def qconj(q):
    return (q[0], -q[1], -q[2], -q[3])


def qrot(q, v):
    w, x, y, z = qmul(qmul(q, (0.0, v[0], v[1], v[2])), qconj(q))
    return (x, y, z)


def qaxis(axis, angle):
    n = math.sqrt(sum(c * c for c in axis))
    s = math.sin(angle / 2) / n
    return (math.cos(angle / 2), axis[0] * s, axis[1] * s, axis[2] * s)


def qnorm(q):
    n = math.sqrt(sum(c * c for c in q))
    return tuple(c / n for c in q)


def add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def length(v):
    return math.sqrt(sum(c * c for c in v))


def shortest_arc(frm, to):
    d = sum(a * b for a, b in zip(frm, to))
    c = (frm[1] * to[2] - frm[2] * to[1], frm[2] * to[0] - frm[0] * to[2], frm[0] * to[1] - frm[1] * to[0])
    return qnorm((1.0 + d, c[0], c[1], c[2]))


def rest_rotation(head, tail, roll):
    d = sub(tail, head)
    n = length(d)
    d = tuple(c / n for c in d)
    return qmul(shortest_arc((0.0, 1.0, 0.0), d), qaxis((0.0, 1.0, 0.0), roll))


def fk(bones, pose):
    """World (rotation, head, tail) per bone for local rotations `pose` (name -> quaternion),
    exactly as sinew::Rig::forward evaluates it."""
    rest = {}
    out = {}
    for b in bones:
        rr = rest_rotation(b["head"], b["tail"], b.get("roll", 0.0))
        rest[b["name"]] = (rr, tuple(b["head"]))
        local = pose.get(b["name"], (1.0, 0.0, 0.0, 0.0))
        ln = length(sub(b["tail"], b["head"]))
        if b.get("parent"):
            prr, ph = rest[b["parent"]]
            rel_rot = qmul(qconj(prr), rr)
            rel_head = qrot(qconj(prr), sub(b["head"], ph))
            pw, phw, _ = out[b["parent"]]
            rot = qmul(qmul(pw, rel_rot), local)
            head = add(phw, qrot(pw, rel_head))
        else:
            rot = qmul(rr, local)
            head = tuple(b["head"])
        out[b["name"]] = (rot, head, add(head, qrot(rot, (0.0, ln, 0.0))))
    return out


def r3(v):
    return [round(c, 6) for c in v]


def bone(name, parent, head, tail, roll=None, limit=None):
    b = {"name": name}
    if parent:
        b["parent"] = parent
    b["head"] = [float(c) for c in head]
    b["tail"] = [float(c) for c in tail]
    if roll is not None:
        b["roll"] = roll
    if limit is not None:
        b["limit"] = limit
    return b


def cone(x_pos, x_neg, z_pos, z_neg, twist=None):
    lim = {"swing": {"cone": {"x_pos": round(x_pos * DEG, 9), "x_neg": round(x_neg * DEG, 9),
                              "z_pos": round(z_pos * DEG, 9), "z_neg": round(z_neg * DEG, 9)}}}
    if twist is not None:
        lim["twist"] = {"min": round(twist[0] * DEG, 9), "max": round(twist[1] * DEG, 9)}
    return lim


def hinge(lo, hi, axis=(1.0, 0.0, 0.0)):
    return {"swing": {"hinge": {"axis": list(axis), "min": round(lo * DEG, 9), "max": round(hi * DEG, 9)}}}


def write(name, doc):
    # The report's methods have no reference pose: their answers are where the iterations lead
    # from the start, so the files ask for none ("least_motion"; the rest pose when absent).
    doc = {"format": "sinew.problem/1", **doc, "reference": "least_motion"}
    # One bone or goal per line: readable, and diffs stay small.
    parts = []
    for k, v in doc.items():
        if isinstance(v, list):
            items = ",\n".join("    " + json.dumps(x) for x in v)
            parts.append(f'  "{k}": [\n{items}\n  ]')
        else:
            parts.append(f'  "{k}": {json.dumps(v)}')
    with open(os.path.join(HERE, name), "w") as f:
        f.write("{\n" + ",\n".join(parts) + "\n}\n")


# --- 10-joint chain: 10 bones of 900 mm = 9000 mm (§4.2) --------------------------------------

def chain10(constrained):
    bones = []
    for i in range(10):
        lim = None
        if constrained:
            # An irregular cone (Alg. 3's four quadrant angles) and a twist range (Alg. 2) on
            # every joint; the root joint swings more.
            lim = cone(50, 40, 45, 35, (-30, 30)) if i == 0 else cone(40, 30, 35, 25, (-20, 20))
        bones.append(bone(f"b{i}", f"b{i-1}" if i else None, (0, 0, 900 * i), (0, 0, 900 * (i + 1)), limit=lim))
    # Figure 4.4's set-up: the target is 6000 mm from the (straight) end effector.
    return {
        "bones": bones,
        "goals": [{"bone": "b9", "target": [4800.0, 0.0, 5400.0]}],
        "settings": {"method": "fabrik", "max_iterations": 200, "tolerance": 0.001},
    }


# --- Y shape: 10 joints (bones), 2 end effectors, sub-base at the top of the trunk -------------

def y_shape():
    bones = []
    for i in range(4):
        bones.append(bone(f"trunk{i}", f"trunk{i-1}" if i else None, (0, 0, 1000 * i), (0, 0, 1000 * (i + 1))))
    for side, sx in (("L", -1), ("R", 1)):
        prev, p = "trunk3", (0.0, 0.0, 4000.0)
        for k in range(3):
            q = (p[0] + sx * 600.0, 0.0, p[2] + 800.0)
            bones.append(bone(f"branch{k}.{side}", prev, p, q))
            prev, p = f"branch{k}.{side}", q
    pose = {"trunk1": qaxis((1, 0, 0), 15 * DEG), "trunk3": qaxis((0, 0, 1), 30 * DEG),
            "branch0.L": qaxis((1, 0, 0), -40 * DEG), "branch1.L": qaxis((0, 0, 1), 35 * DEG),
            "branch0.R": qaxis((0, 0, 1), 25 * DEG), "branch2.R": qaxis((1, 0, 0), 50 * DEG)}
    w = fk(bones, pose)
    return {
        "bones": bones,
        "goals": [{"bone": "branch2.L", "target": r3(w["branch2.L"][2])},
                  {"bone": "branch2.R", "target": r3(w["branch2.R"][2])}],
        "settings": {"method": "fabrik", "max_iterations": 200, "tolerance": 0.001},
    }


# --- Hand: 26 joints (wrist + 5 x CMC, MCP, PIP, DIP, tip), 21 bones, 5 end effectors -----------

FINGERS = {
    # name: (CMC head, direction of the metacarpal, phalanx lengths: metacarpal, proximal, middle, distal)
    "thumb": ((-22.0, -12.0, 12.0), (-0.55, -0.45, 0.70), (45.0, 32.0, 28.0, 24.0)),
    "index": ((-14.0, -2.0, 24.0), (-0.12, 0.0, 1.0), (65.0, 40.0, 24.0, 20.0)),
    "middle": ((-3.0, 0.0, 26.0), (0.0, 0.0, 1.0), (63.0, 45.0, 28.0, 22.0)),
    "ring": ((8.0, 0.0, 24.0), (0.10, 0.0, 1.0), (58.0, 42.0, 27.0, 21.0)),
    "little": ((18.0, -2.0, 20.0), (0.22, 0.0, 1.0), (52.0, 33.0, 20.0, 18.0)),
}


def hand():
    # The palm bone runs from the wrist up the middle of the palm; every finger's first bone
    # starts off the palm's tail (the CMC joints sit low in the palm, spread across it).
    bones = [bone("palm", None, (0, 0, 0), (0, 0, 60))]
    pose = {"palm": qaxis((1, 0, 0), 20 * DEG)}
    for f, (cmc, d, lens) in FINGERS.items():
        n = length(d)
        d = tuple(c / n for c in d)
        prev, p = "palm", cmc
        for k, (seg, ln) in enumerate(zip(("meta", "prox", "mid", "dist"), lens)):
            # Fingers curl slightly toward the palm (-Y) along their length.
            dk = (d[0], d[1] - 0.08 * k, d[2])
            nk = length(dk)
            q = add(p, tuple(ln * c / nk for c in dk))
            name = f"{f}.{seg}"
            bones.append(bone(name, prev, p, q))
            prev, p = name, q
        # A grasp: flex the finger joints (about local X: toward the palm, -Y) and spread a little.
        flex = 30 if f == "thumb" else 45
        pose[f"{f}.meta"] = qaxis((0, 0, 1), (8 if f in ("index", "thumb") else -5) * DEG)
        pose[f"{f}.prox"] = qaxis((1, 0, 0), flex * DEG)
        pose[f"{f}.mid"] = qaxis((1, 0, 0), (flex + 10) * DEG)
        pose[f"{f}.dist"] = qaxis((1, 0, 0), (flex - 10) * DEG)
    w = fk(bones, pose)
    goals = [{"bone": f"{f}.dist", "target": r3(w[f"{f}.dist"][2])} for f in FINGERS]
    return {"bones": bones, "goals": goals,
            "settings": {"method": "fabrik", "max_iterations": 300, "tolerance": 0.001}}


# --- Humanoid: 13 joints (bones), 4 end effectors (wrists and ankles) ---------------------------

def humanoid(constrained):
    bones = [
        bone("pelvis", None, (0, 0, 1000), (0, 0, 1100), limit=constrained and cone(20, 20, 20, 20, (-30, 30)) or None),
        bone("spine", "pelvis", (0, 0, 1100), (0, 5, 1300), limit=constrained and cone(30, 15, 20, 20, (-25, 25)) or None),
        bone("chest", "spine", (0, 5, 1300), (0, 0, 1460), limit=constrained and cone(20, 10, 15, 15, (-20, 20)) or None),
    ]
    for side, s in (("L", 1), ("R", -1)):
        # Local frames of the down-pointing limb bones: X ≈ world +X, Z ≈ world +Y (the back).
        # A swing about +X tilts the bone backward (extension), about -X forward (flexion); about
        # +Z toward world -X, about -Z toward world +X. Left and right swap the Z sides.
        out_z, in_z = (("z_neg", "z_pos") if s > 0 else ("z_pos", "z_neg"))

        def lr(x_pos, x_neg, outward, inward, twist):
            z = {out_z: outward, in_z: inward}
            return cone(x_pos, x_neg, z["z_pos"], z["z_neg"], twist)

        bones += [
            # Clavicles start off the chest's tail (sternoclavicular joints), pointing outward.
            bone(f"clavicle.{side}", "chest", (s * 25, -10, 1420), (s * 165, 5, 1440),
                 limit=constrained and cone(15, 15, 20, 20, (-10, 10)) or None),
            bone(f"upper_arm.{side}", f"clavicle.{side}", (s * 165, 5, 1440), (s * 180, 15, 1150),
                 limit=constrained and lr(50, 150, 150, 30, (-70, 70)) or None),
            # Elbow: a hinge about local X; the forearm bends forward (negative angles), never
            # backward past straight.
            bone(f"forearm.{side}", f"upper_arm.{side}", (s * 180, 15, 1150), (s * 190, 0, 885),
                 limit=constrained and hinge(-145, 0) or None),
        ]
    for side, s in (("L", 1), ("R", -1)):
        out_z, in_z = (("z_neg", "z_pos") if s > 0 else ("z_pos", "z_neg"))

        def lr(x_pos, x_neg, outward, inward, twist):
            z = {out_z: outward, in_z: inward}
            return cone(x_pos, x_neg, z["z_pos"], z["z_neg"], twist)

        bones += [
            # Thighs hang off the pelvis below and beside its head (hip joints), not at its tail.
            bone(f"thigh.{side}", "pelvis", (s * 95, 0, 985), (s * 100, -10, 540),
                 limit=constrained and lr(20, 110, 45, 25, (-35, 35)) or None),
            # Knee: a hinge about local X; the shin bends backward (positive angles) only.
            bone(f"shin.{side}", f"thigh.{side}", (s * 100, -10, 540), (s * 100, 15, 90),
                 limit=constrained and hinge(0, 150) or None),
        ]
    # A reachable (and in-limit) pose: a step forward with the left leg, arms reaching forward.
    pose = {
        "pelvis": qaxis((0, 0, 1), 10 * DEG),
        "spine": qaxis((1, 0, 0), -10 * DEG),
        "chest": qaxis((0, 1, 0), 8 * DEG),
        "upper_arm.L": qaxis((1, 0, 0), -60 * DEG),
        "forearm.L": qaxis((1, 0, 0), -50 * DEG),
        "upper_arm.R": qmul(qaxis((1, 0, 0), -30 * DEG), qaxis((0, 0, 1), -20 * DEG)),
        "forearm.R": qaxis((1, 0, 0), -80 * DEG),
        "thigh.L": qaxis((1, 0, 0), -35 * DEG),
        "shin.L": qaxis((1, 0, 0), 40 * DEG),
        "thigh.R": qaxis((1, 0, 0), 10 * DEG),
        "shin.R": qaxis((1, 0, 0), 15 * DEG),
    }
    w = fk(bones, pose)
    goals = [{"bone": b, "target": r3(w[b][2])} for b in ("forearm.L", "forearm.R", "shin.L", "shin.R")]
    return {"bones": bones, "goals": goals,
            "settings": {"method": "fabrik", "max_iterations": 300, "tolerance": 0.001}}


if __name__ == "__main__":
    write("paper_chain10.json", chain10(False))
    write("paper_chain10_constrained.json", chain10(True))
    write("paper_y_shape.json", y_shape())
    write("paper_hand.json", hand())
    write("paper_humanoid13.json", humanoid(False))
    write("paper_humanoid13_constrained.json", humanoid(True))
