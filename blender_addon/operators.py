# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew's operators: IK Solve, Bake Tracked Targets, Restore IK Constraints, Export IK Problem.

No operator lets an exception out as a traceback: a ReadError is the user's report, and anything
else is reported as a Sinew failure (the work behind them changes nothing before it can succeed)."""

import json
import math
import traceback

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ExportHelper

from . import keys, pipeline
from .rig_reader import ReadError

# Blender's own frame limits (MINAFRAME, MAXFRAME): bakes may cover negative frames.
MIN_FRAME, MAX_FRAME = -1048574, 1048574

ROOT_ITEMS = (
    ('PINNED', "Pinned", "The root bone's head stays where it is"),
    ('FREE', "Free", "The root bone may translate (keyed as its location)"),
)


def _active_armature(context):
    ob = context.active_object
    if ob is None or ob.type != 'ARMATURE' or ob.mode == 'EDIT':
        return None
    return ob


def _poll_editable_armature(cls, context):
    ob = _active_armature(context)
    if ob is None:
        cls.poll_message_set("Select an armature (not in Edit Mode)")
        return False
    if not ob.is_editable:
        # As Blender's pose tools say it (ED_operator_object_active_editable).
        cls.poll_message_set(pipeline.NOT_EDITABLE)
        return False
    return True


def _failed(op, ex):
    """Reports an unexpected exception as an ERROR (the details go to the console)."""
    traceback.print_exc()
    op.report({'ERROR'}, f"Sinew failed: {ex!r}; nothing was changed. Please report this with Export IK Problem")
    return {'CANCELLED'}


class _SolverProps:
    max_iterations: IntProperty(
        name="Iterations", description="Most solver iterations per frame", default=100, min=1, soft_max=1000)
    tolerance: FloatProperty(
        name="Tolerance", description="A goal counts as reached within this distance of its target",
        default=1e-4, min=1e-7, soft_max=0.01, precision=5, subtype='DISTANCE')
    root_mode: EnumProperty(name="Root", items=ROOT_ITEMS, default='PINNED')

    def settings(self):
        # Blender keeps float properties in single precision: pass the value the user typed
        # (1e-4, not 9.99999974737875e-05), which is also what Export IK Problem writes.
        tolerance = float(f"{self.tolerance:.7g}")
        return pipeline.Settings(self.max_iterations, tolerance, self.root_mode.lower())


class SINEW_OT_solve(_SolverProps, bpy.types.Operator):
    """Solve the armature's IK goals at the current frame with Sinew, from the current pose, and
    key the result at this frame (IK constraints stay on, so other frames keep their IK)"""

    bl_idname = "sinew.solve"
    bl_label = "IK Solve"
    bl_options = {'REGISTER', 'UNDO'}

    use_keyframes: BoolProperty(
        name="Insert Keyframes", description="Key the rotation of the bones the solve moved at the current frame",
        default=True)

    @classmethod
    def poll(cls, context):
        return _poll_editable_armature(cls, context)

    def execute(self, context):
        ob = _active_armature(context)
        if ob is None:
            self.report({'ERROR'}, "The active object is not an armature")
            return {'CANCELLED'}
        try:
            res = pipeline.solve_pose(context, ob, self.settings(), key=self.use_keyframes)
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # a bug: never a traceback in the UI
            return _failed(self, ex)
        for w in res.problem.warnings:
            self.report({'WARNING'}, w)
        note = pipeline.itasc_note(ob, self.settings())
        if note:
            self.report({'INFO'}, note)
        if res.problem.replaced:
            names = ", ".join(f'"{c}" (bone "{b}")' for b, c in res.problem.replaced)
            self.report({'INFO'}, f"Sinew: IK constraint(s) {names} stay on: IK Solve mutes nothing, so every other "
                                  "frame keeps its IK, and at this frame Blender's IK acts on top of the keyed pose "
                                  "(Bake Tracked Targets mutes them)")
        self.report(*solve_report(res))
        return {'FINISHED'}


def solve_report(res):
    """(level, text) of a solve: what Blender's evaluated pose reaches, after writing."""
    goals = res.problem.goals
    misses = res.misses
    worst = float(misses.max()) if misses.size else 0.0
    tail = f"{res.iterations} iterations, worst residual {worst:.6g}, {res.seconds * 1000:.1f} ms ({res.goal_report()})"
    if res.reached_in_blender:
        return {'INFO'}, f"Sinew: {len(goals)} goal(s) reached, {tail}"
    tol = pipeline.verify_tolerance(res.tolerance)
    missed = [(g.bone, float(m)) for g, m in zip(goals, misses) if m > tol]
    what = "; ".join(f'bone "{b}" misses its target by {m:.6g}' for b, m in missed)
    differs = [(g.bone, float(r)) for g, m, r in zip(goals, misses, res.residuals) if m > r + tol]
    if differs:
        sinew_says = ", ".join(f'"{b}" {r:.6g}' for b, r in differs)
        return {'WARNING'}, (f"Sinew: {len(missed)} of {len(goals)} goal(s) not reached in Blender's evaluated pose "
                             f"({what}), although Sinew's solution comes closer (its residuals: {sinew_says}): "
                             f"something on the rig acts on top of the solved rotations (see the warnings); {tail}")
    return {'INFO'}, (f"Sinew: {len(missed)} of {len(goals)} goal(s) not reached ({res.stop_reason}): {what}; {tail}")


class SINEW_OT_bake(_SolverProps, bpy.types.Operator):
    """Bake the armature's IK goals over a frame range: sample every target per frame, solve the
    whole sequence with Sinew and key the result"""

    bl_idname = "sinew.bake"
    bl_label = "Bake Tracked Targets"
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(name="Start", description="First frame to bake (default: the scene's)",
                             min=MIN_FRAME, max=MAX_FRAME)
    frame_end: IntProperty(name="End", description="Last frame to bake (default: the scene's)",
                           min=MIN_FRAME, max=MAX_FRAME)
    new_action: BoolProperty(
        name="New Action",
        description="Bake into an action of its own, <object>_Sinew, that starts as a copy of the current one "
                    "(which is kept, with a fake user); baking again goes into that same action. Off: replace keys "
                    "inside the range of the current action",
        default=True)
    only_moved: BoolProperty(
        name="Only Moved Bones", description="Key only the bones the goals move (off: every bone)", default=True)
    keep_constraints: BoolProperty(
        name="Keep IK Constraints",
        description="Leave the Blender IK constraints Sinew replaced enabled (by default they are muted, so what you "
                    "see is what Sinew baked; Restore IK Constraints turns them back on)",
        default=False)
    # Key reduction (key_reduction.py): same names as the bake dialog's.
    use_key_reduction: BoolProperty(
        name="Key Reduction",
        description="After baking, remove the keys the animation does not need: the Bezier keys left keep every bone "
                    "within the angle below of the bake on every frame, and the root within the distance",
        default=False)
    reduction_angle: FloatProperty(
        name="Angle Tolerance",
        description="Largest rotation, in degrees, by which a bone may differ from the bake on any frame",
        default=0.1, min=0.0, soft_max=5.0, precision=3)
    reduction_distance: FloatProperty(
        name="Distance Tolerance",
        description="Largest distance by which the root bone's location may differ from the bake on any frame",
        default=1e-4, min=0.0, soft_max=0.01, precision=5, subtype='DISTANCE')

    _job = None
    _timer = None
    _gen = None

    @classmethod
    def poll(cls, context):
        return _poll_editable_armature(cls, context)

    def _range(self, context):
        s = context.scene
        start = self.frame_start if self.properties.is_property_set("frame_start") else s.frame_start
        end = self.frame_end if self.properties.is_property_set("frame_end") else s.frame_end
        self.frame_start, self.frame_end = start, end
        return start, end

    def _make_job(self, context, chunk=0):
        ob = _active_armature(context)
        if ob is None:
            raise ReadError("The active object is not an armature")
        start, end = self._range(context)
        reduction = (math.radians(self.reduction_angle), self.reduction_distance) if self.use_key_reduction else None
        return pipeline.BakeJob(context, ob, start, end, self.settings(), new_action=self.new_action,
                                only_moved=self.only_moved, keep_constraints=self.keep_constraints, chunk=chunk,
                                reduction=reduction)

    def _finish(self, job):
        r = job.result
        for w in r.warnings:
            self.report({'WARNING'}, w)
        note = pipeline.itasc_note(job.ob, job.settings)
        if note:
            self.report({'INFO'}, note)
        if r.action_note:
            self.report({'INFO'}, r.action_note)
        n = len(r.frames)
        per = r.seconds / max(n, 1)
        not_reached = int((~r.reached).sum())
        extra = f", {not_reached} frame(s) not reached by Sinew" if not_reached else ""
        checked = ""
        if r.misses is not None:
            worst = float(r.misses.max()) if r.misses.size else 0.0
            checked = f"; Blender's evaluated pose checked at {len(r.checked_frames)} frames, worst miss {worst:.6g}"
        self.report({'INFO'}, f"Sinew baked {n} frames in {r.seconds:.2f} s ({per * 1000:.2f} ms/frame, solve "
                              f"{r.solve_seconds:.2f} s), worst residual {r.worst_residual:.6g}{extra}{checked} "
                              f"(worst frame per goal: {r.goal_report()})")
        if r.reduction is not None:
            self.report({'INFO'}, f"Sinew: {r.reduction.report()}")
        missed = r.blender_misses
        if missed:
            goals = job.problem.goals
            frames = sorted({f for f, _i, _m in missed})
            f, i, m = missed[0]
            self.report({'WARNING'}, f"Sinew: Blender's evaluated pose misses targets at {len(frames)} of the "
                                     f"{len(r.checked_frames)} checked frames (worst: bone \"{goals[i].bone}\" by "
                                     f"{m:.6g} at frame {f}); something on the rig acts on top of the baked keys "
                                     "(see the warnings)")

    def execute(self, context):
        try:
            job = self._make_job(context)
            job.run()
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # a bug: the job put the scene back; never a traceback in the UI
            return _failed(self, ex)
        self._finish(job)
        return {'FINISHED'}

    def invoke(self, context, event):
        if context.window is None or bpy.app.background:
            return self.execute(context)
        try:
            job = self._make_job(context, chunk=10)
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:
            return _failed(self, ex)
        self._job = job
        self._gen = job.steps()
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.01, window=context.window)
        wm.progress_begin(0, 100)
        wm.modal_handler_add(self)
        context.workspace.status_text_set("Sinew: baking… (Esc to cancel)")
        return {'RUNNING_MODAL'}

    def _cleanup(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
        wm.progress_end()
        context.workspace.status_text_set(None)

    def modal(self, context, event):
        if event.type == 'ESC':
            self._gen.close()
            self._job.cancel()
            self._cleanup(context)
            self.report({'WARNING'}, "Sinew bake cancelled; nothing was changed")
            return {'CANCELLED'}
        if event.type != 'TIMER':
            # Swallow other input: the scene must stay still while the bake reads it.
            return {'RUNNING_MODAL'}
        try:
            progress = next(self._gen)
        except StopIteration:
            progress = 1.0
        except Exception as ex:  # ReadError, or a bug: either way stop cleanly (the job restored the scene)
            self._cleanup(context)
            if isinstance(ex, ReadError):
                self.report({'ERROR'}, str(ex))
                return {'CANCELLED'}
            return _failed(self, ex)
        context.window_manager.progress_update(int(progress * 100))
        context.workspace.status_text_set(f"Sinew: baking… {progress * 100:.0f}% (Esc to cancel)")
        if self._job.done and self._job.result is not None:
            self._cleanup(context)
            self._finish(self._job)
            return {'FINISHED'}
        return {'RUNNING_MODAL'}


class SINEW_OT_restore_constraints(bpy.types.Operator):
    """Turn back on the Blender IK constraints that Sinew bakes muted on the active armature
    (exactly those, as recorded when they were muted)"""

    bl_idname = "sinew.restore_constraints"
    bl_label = "Restore IK Constraints"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        if not _poll_editable_armature(cls, context):
            return False
        if not keys.muted_records(_active_armature(context)):
            cls.poll_message_set("Sinew has not muted any IK constraint of this armature")
            return False
        return True

    def execute(self, context):
        ob = _active_armature(context)
        if ob is None or not ob.is_editable:
            self.report({'ERROR'}, "The active object is not an editable armature")
            return {'CANCELLED'}
        try:
            restored, problems = keys.restore_constraints(ob)
        except Exception as ex:
            return _failed(self, ex)
        for p in problems:
            self.report({'WARNING'}, p)
        if restored:
            self.report({'INFO'}, f"Sinew: turned {len(restored)} IK constraint(s) back on: {', '.join(restored)}")
        else:
            self.report({'INFO'}, "Sinew: the IK constraints it muted are already on")
        return {'FINISHED'}


class SINEW_OT_export_problem(_SolverProps, bpy.types.Operator, ExportHelper):
    """Write the exact IK problem Sinew would solve for this armature at the current frame to a
    JSON file (sinew.problem/1), e.g. for a bug report"""

    bl_idname = "sinew.export_problem"
    bl_label = "Export IK Problem"
    bl_options = {'REGISTER'}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'})

    @classmethod
    def poll(cls, context):
        if _active_armature(context) is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        return True

    def execute(self, context):
        ob = _active_armature(context)
        if ob is None:
            self.report({'ERROR'}, "The active object is not an armature")
            return {'CANCELLED'}
        try:
            doc = pipeline.export_problem(context, ob, self.settings())
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:
            return _failed(self, ex)
        try:
            with open(self.filepath, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, indent=1)
        except OSError as ex:
            self.report({'ERROR'}, f"Could not write {self.filepath}: {ex}")
            return {'CANCELLED'}
        self.report({'INFO'}, f"Wrote {len(doc['bones'])} bones and {len(doc['goals'])} goals to {self.filepath}")
        return {'FINISHED'}


def menu_pose(self, context):
    layout = self.layout
    layout.separator()
    layout.operator(SINEW_OT_solve.bl_idname, icon='CON_KINEMATIC')
    layout.operator(SINEW_OT_bake.bl_idname, icon='ACTION')
    layout.operator(SINEW_OT_restore_constraints.bl_idname, icon='CONSTRAINT_BONE')


def menu_object_animation(self, context):
    layout = self.layout
    layout.separator()
    layout.operator(SINEW_OT_solve.bl_idname, icon='CON_KINEMATIC')
    layout.operator(SINEW_OT_bake.bl_idname, icon='ACTION')


classes = (SINEW_OT_solve, SINEW_OT_bake, SINEW_OT_restore_constraints, SINEW_OT_export_problem)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.VIEW3D_MT_pose.append(menu_pose)
    bpy.types.VIEW3D_MT_object_animation.append(menu_object_animation)


def unregister():
    bpy.types.VIEW3D_MT_object_animation.remove(menu_object_animation)
    bpy.types.VIEW3D_MT_pose.remove(menu_pose)
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
