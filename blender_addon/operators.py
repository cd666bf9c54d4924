# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew's operators: IK Solve, Bake Tracked Targets, Export IK Problem."""

import json

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ExportHelper

from . import pipeline
from .rig_reader import ReadError

ROOT_ITEMS = (
    ('PINNED', "Pinned", "The root bone's head stays where it is"),
    ('FREE', "Free", "The root bone may translate (keyed as its location)"),
)


def _active_armature(context):
    ob = context.active_object
    if ob is None or ob.type != 'ARMATURE' or ob.mode == 'EDIT':
        return None
    return ob


class _SolverProps:
    max_iterations: IntProperty(
        name="Iterations", description="Most solver iterations per frame", default=100, min=1, soft_max=1000)
    tolerance: FloatProperty(
        name="Tolerance", description="A goal counts as reached within this distance of its target",
        default=1e-4, min=1e-7, soft_max=0.01, precision=5, subtype='DISTANCE')
    root_mode: EnumProperty(name="Root", items=ROOT_ITEMS, default='PINNED')
    keep_constraints: BoolProperty(
        name="Keep IK Constraints",
        description="Leave the Blender IK constraints Sinew replaced enabled "
                    "(by default they are muted, so what you see is what Sinew solved)",
        default=False)

    def settings(self):
        # Blender keeps float properties in single precision: pass the value the user typed
        # (1e-4, not 9.99999974737875e-05), which is also what Export IK Problem writes.
        tolerance = float(f"{self.tolerance:.7g}")
        return pipeline.Settings(self.max_iterations, tolerance, self.root_mode.lower())


class SINEW_OT_solve(_SolverProps, bpy.types.Operator):
    """Solve the armature's IK goals at the current frame with Sinew, from the current pose"""

    bl_idname = "sinew.solve"
    bl_label = "IK Solve"
    bl_options = {'REGISTER', 'UNDO'}

    use_keyframes: BoolProperty(
        name="Insert Keyframes", description="Key the rotation of the bones the solve moved at the current frame",
        default=True)

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
            res = pipeline.solve_pose(context, ob, self.settings(), key=self.use_keyframes,
                                      keep_constraints=self.keep_constraints)
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        for w in res.problem.warnings:
            self.report({'WARNING'}, w)
        worst = float(res.residuals.max()) if res.residuals.size else 0.0
        state = "reached" if res.reached else f"not reached ({res.stop_reason})"
        self.report({'INFO'}, f"Sinew: {len(res.problem.goals)} goal(s) {state}, {res.iterations} iterations, "
                              f"worst residual {worst:.6g}, {res.seconds * 1000:.1f} ms ({res.goal_report()})")
        return {'FINISHED'}


class SINEW_OT_bake(_SolverProps, bpy.types.Operator):
    """Bake the armature's IK goals over a frame range: sample every target per frame, solve the
    whole sequence with Sinew and key the result"""

    bl_idname = "sinew.bake"
    bl_label = "Bake Tracked Targets"
    bl_options = {'REGISTER', 'UNDO'}

    frame_start: IntProperty(name="Start", description="First frame to bake (default: the scene's)", min=0)
    frame_end: IntProperty(name="End", description="Last frame to bake (default: the scene's)", min=0)
    new_action: BoolProperty(
        name="New Action",
        description="Bake into a new action that starts as a copy of the current one; the current action "
                    "is kept (with a fake user). Off: replace keys inside the range of the current action",
        default=True)
    only_moved: BoolProperty(
        name="Only Moved Bones", description="Key only the bones the goals move (off: every bone)", default=True)

    _job = None
    _timer = None
    _gen = None

    @classmethod
    def poll(cls, context):
        if _active_armature(context) is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        return True

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
        return pipeline.BakeJob(context, ob, start, end, self.settings(), new_action=self.new_action,
                                only_moved=self.only_moved, keep_constraints=self.keep_constraints, chunk=chunk)

    def _finish(self, job):
        r = job.result
        for w in r.warnings:
            self.report({'WARNING'}, w)
        n = len(r.frames)
        per = r.seconds / max(n, 1)
        not_reached = int((~r.reached).sum())
        extra = f", {not_reached} frame(s) not reached" if not_reached else ""
        self.report({'INFO'}, f"Sinew baked {n} frames in {r.seconds:.2f} s ({per * 1000:.2f} ms/frame, solve "
                              f"{r.solve_seconds:.2f} s), worst residual {r.worst_residual:.6g}{extra} "
                              f"(worst frame per goal: {r.goal_report()})")

    def execute(self, context):
        try:
            job = self._make_job(context)
            job.run()
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
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
            self.report({'ERROR'}, str(ex) if isinstance(ex, ReadError) else f"Sinew bake failed: {ex!r}")
            return {'CANCELLED'}
        context.window_manager.progress_update(int(progress * 100))
        context.workspace.status_text_set(f"Sinew: baking… {progress * 100:.0f}% (Esc to cancel)")
        if self._job.done and self._job.result is not None:
            self._cleanup(context)
            self._finish(self._job)
            return {'FINISHED'}
        return {'RUNNING_MODAL'}


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


def menu_object_animation(self, context):
    layout = self.layout
    layout.separator()
    layout.operator(SINEW_OT_solve.bl_idname, icon='CON_KINEMATIC')
    layout.operator(SINEW_OT_bake.bl_idname, icon='ACTION')


classes = (SINEW_OT_solve, SINEW_OT_bake, SINEW_OT_export_problem)


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
