# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew's panels: a Bone-properties sub-panel and a "Sinew" tab in the 3D view's sidebar."""

from __future__ import annotations

import math
import textwrap

import bpy

from . import limit_drawing, pipeline, rig_reader


def _pose_bone(context):
    ob = context.object
    if ob is None or ob.type != 'ARMATURE' or ob.pose is None:
        return None
    bone = context.bone if getattr(context, "bone", None) is not None else ob.data.bones.active
    if bone is None:
        return None
    return ob.pose.bones.get(bone.name)


def draw_target(layout, s, prop, sub_prop, label):
    """The target object and, as Blender's constraints show it, its bone (an armature) or vertex
    group (a mesh); for another object, the field only while it holds a name (left from an
    earlier target, or a lattice's vertex group, which Sinew refuses), so that it can be cleared."""
    col = layout.column(align=True)
    col.prop(s, prop, text=label)
    ob = getattr(s, prop)
    if ob is None:
        return
    if ob.type == 'ARMATURE':
        col.prop_search(s, sub_prop, ob.data, "bones", text="Bone")
    elif ob.type == 'MESH':
        col.prop_search(s, sub_prop, ob, "vertex_groups", text="Vertex Group")
    elif getattr(s, sub_prop):
        col.prop(s, sub_prop)


# What the axis of a Line, Plane or Half-Space goal's target is, per kind (the label of goal_axis).
_AXIS_LABELS = {'LINE': "Direction", 'PLANE': "Normal", 'HALF_SPACE': "Normal"}


def draw_goal(layout, pb):
    s = pb.sinew
    layout.use_property_split = True
    layout.use_property_decorate = False
    col = layout.column()
    col.active = s.use_goal
    draw_target(col, s, "target", "subtarget", "Target")
    if s.use_goal and s.target is None:
        col.label(text="The goal needs a target", icon='ERROR')
    kind = s.goal_kind
    col.prop(s, "goal_kind")
    if kind in _AXIS_LABELS:
        # An axis of the target (or its bone): the line's direction or the plane's normal.
        col.row().prop(s, "goal_axis", text=_AXIS_LABELS[kind], expand=True)
    elif kind == 'AIM':
        col.row().prop(s, "aim_axis", expand=True)
    col.prop(s, "chain_length")
    col.prop(s, "weight")
    if kind not in ('AIM', 'ORIENTATION'):  # a point of the bone: its tail or head
        col.prop(s, "use_tail")
    if kind == 'AIM':
        # An aim leaves the turn about the axis free: it takes no rotation.
        sub = col.column()
        sub.active = False
        sub.prop(s, "use_orientation")
        if s.use_orientation:
            col.label(text="Aim takes no rotation: turn it off", icon='ERROR')
    elif kind != 'ORIENTATION':  # (Orientation always matches the target's rotation)
        col.prop(s, "use_orientation")
    draw_target(col, s, "pole_target", "pole_subtarget", "Pole")
    if s.pole_target is not None:
        col.prop(s, "pole_angle")
    iks = [c for c in pb.constraints if c.type == 'IK']
    if iks:
        box = layout.box()
        for c in iks:
            state = "muted" if c.mute else ("replaced by the Sinew goal" if s.use_goal else "imported as a goal")
            box.label(text=f'IK constraint "{c.name}": {state}', icon='CONSTRAINT_BONE')


def draw_limits(layout, pb):
    s = pb.sinew
    layout.use_property_split = True
    layout.use_property_decorate = False
    col = layout.column(align=True)
    col.prop(s, "use_cone")
    sub = col.column(align=True)
    sub.active = s.use_cone
    sub.prop(s, "cone_x_pos")
    sub.prop(s, "cone_x_neg")
    sub.prop(s, "cone_z_pos")
    sub.prop(s, "cone_z_neg")
    col = layout.column(align=True)
    col.prop(s, "use_twist")
    sub = col.column(align=True)
    sub.active = s.use_twist
    sub.prop(s, "twist_min")
    sub.prop(s, "twist_max")
    col = layout.column()
    col.prop(s, "lock")
    col.prop(s, "stiffness")
    lim = rig_reader.read_limit(pb)
    if lim.from_blender:  # (what Sinew's cone and twist leave of Blender's IK locks and limits)
        layout.label(text=f"From Blender: {lim.from_blender}", icon='INFO')


class BONE_PT_sinew(bpy.types.Panel):
    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "bone"
    bl_label = "Sinew IK"
    bl_description = "Sinew goal and limits of this bone (its Blender IK constraints and IK limits are used too)"
    bl_options = {'DEFAULT_CLOSED'}

    @classmethod
    def poll(cls, context):
        ob = context.object
        return ob is not None and ob.type == 'ARMATURE' and ob.mode != 'EDIT' and _pose_bone(context) is not None

    def draw(self, context):
        # Short: the sub-panels below say the rest (the description is the header's tooltip).
        self.layout.label(text="Blender IK is used too", icon='INFO')


class BONE_PT_sinew_goal(bpy.types.Panel):
    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "bone"
    bl_parent_id = "BONE_PT_sinew"
    bl_label = "Goal"

    def draw_header(self, context):
        self.layout.prop(_pose_bone(context).sinew, "use_goal", text="")

    def draw(self, context):
        draw_goal(self.layout, _pose_bone(context))


class BONE_PT_sinew_limits(bpy.types.Panel):
    bl_space_type = 'PROPERTIES'
    bl_region_type = 'WINDOW'
    bl_context = "bone"
    bl_parent_id = "BONE_PT_sinew"
    bl_label = "Limits"

    def draw(self, context):
        draw_limits(self.layout, _pose_bone(context))


class _SidebarPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "Sinew"

    @classmethod
    def poll(cls, context):
        ob = context.object
        return ob is not None and ob.type == 'ARMATURE'


def line_chars(context, default: int = 40) -> int:
    """Characters a line of the sidebar holds (at least 20), for text wrapped over labels."""
    region = getattr(context, "region", None)
    if region is None:
        return default
    return max(int(region.width / (7 * context.preferences.system.ui_scale)), 20)


def draw_wrapped(layout, text: str, chars: int, icon: str) -> None:
    """``text`` as labels of at most ``chars`` characters, ``icon`` on the first, the rest indented."""
    col = layout.column(align=True)
    for i, line in enumerate(textwrap.wrap(text, max(chars - 4, 16))):
        col.label(text=line, icon=icon if i == 0 else 'BLANK1')


class VIEW3D_PT_sinew(_SidebarPanel, bpy.types.Panel):
    bl_label = "Sinew IK"

    def draw(self, context):
        layout = self.layout
        problem = rig_reader.engine_problem()
        if problem is not None:  # Solve, Bake, Compare and Export refuse with this (operators._engine_refused)
            box = layout.box()
            box.alert = True
            draw_wrapped(box, problem, line_chars(context), 'ERROR')
        col = layout.column(align=True)
        col.operator("sinew.solve", icon='CON_KINEMATIC')
        col.operator("sinew.bake", text="Bake IK to Keyframes...", icon='ACTION')
        col.operator("sinew.restore_constraints", icon='CONSTRAINT_BONE')
        layout.operator("sinew.export_problem", icon='EXPORT')
        layout.prop(context.scene, "sinew_show_limits")
        if context.scene.sinew_show_limits:  # say why little or nothing is drawn (Rigify hides its IK bones)
            col = layout.column(align=True)
            note = limit_drawing.visibility_note(context.object, context.evaluated_depsgraph_get())
            for i, line in enumerate(note):
                col.label(text=line, icon='INFO' if i == 0 else 'BLANK1')


class VIEW3D_PT_sinew_bone(_SidebarPanel, bpy.types.Panel):
    bl_parent_id = "VIEW3D_PT_sinew"
    bl_label = "Active Bone"

    @classmethod
    def poll(cls, context):
        return super().poll(context) and context.object.mode != 'EDIT' and _pose_bone(context) is not None

    def draw(self, context):
        pb = _pose_bone(context)
        layout = self.layout
        layout.label(text=pb.name, icon='BONE_DATA')
        layout.prop(pb.sinew, "use_goal")
        draw_goal(layout.column(), pb)
        layout.separator()
        draw_limits(layout.column(), pb)


class VIEW3D_PT_sinew_analysis(_SidebarPanel, bpy.types.Panel):
    bl_parent_id = "VIEW3D_PT_sinew"
    bl_label = "Chains"

    def draw(self, context):
        layout = self.layout
        a = rig_reader.analysis(context.object)
        if a["error"]:
            layout.label(text=a["error"], icon='ERROR')
            return
        if not a["goals"]:
            layout.label(text="No goals: add a Sinew goal or an IK constraint", icon='INFO')
        else:
            box = layout.box()
            box.label(text="Sub-bases: " + (", ".join(a["sub_bases"]) or "none"), icon='DECORATE_KEYFRAME')
        for bone, source, moved in a["goals"]:
            box = layout.box()
            box.label(text=f"{bone}  ({source})", icon='CON_KINEMATIC')
            box.label(text=f"moves {len(moved)}: " + ", ".join(moved))
        for w in a["warnings"]:  # (also why there is no goal: a constraint that is skipped)
            layout.label(text=w, icon='ERROR')


class VIEW3D_PT_sinew_last_bake(_SidebarPanel, bpy.types.Panel):
    bl_parent_id = "VIEW3D_PT_sinew"
    bl_label = "Last Bake"

    @classmethod
    def poll(cls, context):
        return super().poll(context) and pipeline.last_bake_results(context.object) is not None

    def draw(self, context):
        draw_last_bake(self.layout, pipeline.last_bake_results(context.object))


def draw_last_bake(layout, doc):
    """The per-goal results of the last bake (``pipeline.store_bake_results``): each goal's
    worst distance left and at which frame, its orientation error, and Blender's worst miss."""
    start, end = doc.get("frames", (0, 0))
    layout.label(text=f"Frames {start} to {end}, {pipeline.method_label(str(doc.get('method', '')))}",
                 icon='ACTION')
    tol = float(doc.get("tolerance", 0.0))
    for g in doc["goals"]:
        ok = not g.get("missed") and not g.get("blender_missed")
        box = layout.box()
        col = box.column(align=True)
        col.label(text=str(g.get("bone", "?")), icon='CHECKMARK' if ok else 'ERROR')
        if ok:
            col.label(text=f"Reached, worst {g.get('worst', 0.0):.3g}")
        elif not g.get("missed"):
            col.label(text=f"Sinew reached it, worst {g.get('worst', 0.0):.3g}")
            col.label(text=f"Blender misses at {g.get('blender_missed')} checked frames")
        else:
            col.label(text=f"Misses by {g.get('worst', 0.0):.3g} at frame {g.get('frame')}")
            col.label(text=f"{g.get('missed')} frames beyond {tol:.3g}")
        if g.get("orientation") is not None:
            col.label(text=f"Orientation error {g['orientation']:.3g}°")
        if g.get("blender") is not None:
            col.label(text=f"In Blender {g['blender']:.3g} at frame {g.get('blender_frame')}")


class VIEW3D_PT_sinew_compare(_SidebarPanel, bpy.types.Panel):
    bl_parent_id = "VIEW3D_PT_sinew"
    bl_label = "Method Comparison"

    def draw(self, context):
        layout = self.layout
        layout.operator("sinew.compare_methods", icon='SORTTIME')
        doc = pipeline.compare_results(context.object)
        if doc is not None:
            draw_comparison(layout, doc, context.scene, line_chars(context))


def format_length(scene, value) -> str:
    """A length in armature space (as the solver's tolerance) in the scene's units, as Blender
    shows a distance: ``12.3 µm``, ``4.2 mm`` (plain with the unit system None)."""
    if value is None:
        return "-"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    units = scene.unit_settings
    if units.system == 'NONE':
        return f"{value:.3g}"
    return bpy.utils.units.to_string(units.system, 'LENGTH', value * units.scale_length, precision=3)


def format_degrees(value) -> str:
    if value is None:
        return "-"
    value = float(value)
    return "0°" if 0.0 <= value < 5e-4 else f"{value:.2g}°"


def _cells(layout, factors):
    """A table row: a cell per factor (its share of what the cells before it left), then one
    cell for the rest."""
    cells = []
    rest = layout
    for f in factors:
        split = rest.split(factor=f, align=True)
        cells.append(split.row(align=True))
        rest = split
    cells.append(rest.row(align=True))
    return cells


def draw_comparison(layout, doc, scene, chars=40):
    """Compare IK Methods' results (``pipeline.compare_methods``) as a table: a row per method
    with whether it reached every goal, its worst distance left (and angle, where a goal has an
    orientation), its iterations and the engine call's time; the fastest that reached is starred,
    and a method that refuses the problem says why (wrapped to ``chars`` characters a line)."""
    goals = doc.get("goals", 0)
    layout.label(text=f"Frame {doc.get('frame')}: {goals} goal{'s' if goals != 1 else ''}, "
                      f"{doc.get('max_iterations')} iterations, tolerance {format_length(scene, doc.get('tolerance'))}",
                 icon='TIME')
    if doc.get("frame") != scene.frame_current:
        layout.label(text=f"Compared at frame {doc.get('frame')}, not this one", icon='ERROR')
    angles = bool(doc.get("orientation"))
    # Method | Error | (Angle) | Iterations | Time in ms
    factors = (0.38, 0.42, 0.45, 0.5) if angles else (0.4, 0.45, 0.45)
    col = layout.box().column(align=True)
    heads = ("Method", "Error", "Angle", "Iter.", "ms") if angles else ("Method", "Error", "Iter.", "ms")
    for cell, text in zip(_cells(col.row(align=True), factors), heads):
        cell.label(text=text)
    best = doc.get("best")
    for r in doc["methods"]:
        name = pipeline.method_label(str(r["method"]))
        if r.get("unsupported") or r.get("failed"):
            sub = col.column(align=True)
            sub.active = False
            sub.alert = bool(r.get("failed"))
            name_cell, rest = _cells(sub.row(align=True), factors[:1])
            name_cell.label(text=name, icon='CANCEL' if r.get("unsupported") else 'ERROR')
            rest.label(text="n/a" if r.get("unsupported") else "failed")
            why = pipeline.short_reason(r["unsupported"]) if r.get("unsupported") else str(r["failed"])
            draw_wrapped(sub, why, chars, 'BLANK1')
            continue
        row = col.row(align=True)
        row.alert = not r["reached"]
        cells = _cells(row, factors)
        icon = 'SOLO_ON' if r["method"] == best else ('CHECKMARK' if r["reached"] else 'X')
        values = [name, format_length(scene, r["position"])]
        values += [format_degrees(r.get("orientation"))] if angles else []
        values += [str(r["iterations"]), f"{r['ms']:.3g}"]
        cells[0].label(text=values[0], icon=icon)
        for cell, text in zip(cells[1:], values[1:]):
            cell.label(text=text)
    if best is not None:
        r = next(r for r in doc["methods"] if r["method"] == best)
        layout.label(text=f"Fastest to reach: {pipeline.method_label(best)}, {r['ms']:.3g} ms", icon='SOLO_ON')
    else:
        layout.label(text="No method reached every goal", icon='INFO')


classes = (BONE_PT_sinew, BONE_PT_sinew_goal, BONE_PT_sinew_limits,
           VIEW3D_PT_sinew, VIEW3D_PT_sinew_bone, VIEW3D_PT_sinew_analysis, VIEW3D_PT_sinew_last_bake,
           VIEW3D_PT_sinew_compare)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
