# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew's operators: Solve IK, Bake IK to Keyframes, Compare IK Methods, Restore IK Constraints,
Export IK Problem.

Where they are: Pose > Inverse Kinematics (Solve IK, Restore IK Constraints, Compare IK Methods), Pose > Animation
and Object > Animation (Bake IK to Keyframes, for an armature), the Sinew tab of the sidebar (all
of them; Compare IK Methods in its Method Comparison panel), and F3. Solve, Bake and Restore act
on every armature in Pose Mode (multi-object editing), one engine call per armature; Compare IK
Methods on the active armature, one engine call per method, and it changes nothing.

No operator lets an exception out as a traceback: a ReadError is the user's report, and anything
else is reported as a Sinew failure (the work behind them changes nothing before it can succeed)."""

import json
import math
import traceback

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty
from bpy_extras.io_utils import ExportHelper

from . import keys, pipeline, rig_reader
from .rig_reader import ReadError

# Blender's own frame limits (MINAFRAME, MAXFRAME): bakes may cover negative frames.
MIN_FRAME, MAX_FRAME = -1048574, 1048574

ROOT_ITEMS = (
    ('PINNED', "Pinned", "The root bone's head stays where it is"),
    ('FREE', "Free", "The root bone may translate (keyed as its location)"),
)


def _method_items():
    """The engine's methods (``sinew.methods()``), read when the add-on registers, so a method
    the engine adds is offered without a change here."""
    try:
        names = pipeline.method_names()
    except ReadError:  # the engine did not load, or an older build is still loaded: the operators say so when run
        names = [pipeline.DEFAULT_METHOD]
    return tuple((n.upper(), pipeline.method_label(n), pipeline.method_description(n)) for n in names)


METHOD_ITEMS = _method_items()
DEFAULT_METHOD_ITEM = (pipeline.DEFAULT_METHOD.upper() if any(i[0] == pipeline.DEFAULT_METHOD.upper()
                                                              for i in METHOD_ITEMS) else METHOD_ITEMS[0][0])


def _active_armature(context):
    ob = context.active_object
    if ob is None or ob.type != 'ARMATURE' or ob.mode == 'EDIT':
        return None
    return ob


def armatures(context):
    """The armatures an operator acts on: every armature in Pose Mode with the active one
    (multi-object pose editing), the active first; outside Pose Mode the active armature."""
    ob = _active_armature(context)
    if ob is None:
        return []
    if ob.mode != 'POSE':
        return [ob]
    others = [o for o in (getattr(context, "objects_in_mode", None) or ())
              if o != ob and o.type == 'ARMATURE' and o.mode == 'POSE']
    return [ob] + others


def _editable_armatures(op, context):
    """``armatures(context)``, leaving out (with a warning) the non-editable ones besides the
    active armature; None (after an ERROR report) when there is none."""
    obs = armatures(context)
    if not obs:
        op.report({'ERROR'}, "The active object is not an armature")
        return None
    out = [obs[0]]
    for ob in obs[1:]:
        if ob.is_editable:
            out.append(ob)
        else:
            op.report({'WARNING'}, f'Sinew: skipped armature "{ob.name}": {pipeline.NOT_EDITABLE}')
    return out


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


def _engine_refused(op) -> bool:
    """True, after an ERROR report, when the engine cannot be used (``rig_reader.engine``: it does
    not import, or another build than Blender installed with the add-on is loaded, as after an
    update while Blender runs). The first thing every operator that calls the engine does, before
    it reads or changes anything."""
    try:
        rig_reader.engine()
    except ReadError as ex:
        op.report({'ERROR'}, str(ex))
        return True
    return False


def _failed(op, ex):
    """Reports an unexpected exception as an ERROR (the details go to the console)."""
    traceback.print_exc()
    op.report({'ERROR'}, f"Sinew failed: {ex!r}; nothing was changed. Please report this with Export IK Problem")
    return {'CANCELLED'}


def _count(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _see_warnings(warnings):
    """``" (see the warnings)"`` when the operator reported ``warnings`` about the rig, else nothing
    (a report never points at warnings that are not there)."""
    return " (see the warnings)" if warnings else ""


def _prefix(ob, several):
    return f'"{ob.name}": ' if several else ""


class _SolverProps:
    max_iterations: IntProperty(
        name="Iterations", description="Most solver iterations per frame", default=100, min=1, soft_max=1000)
    tolerance: FloatProperty(
        name="Tolerance", description="A goal counts as reached within this distance of its target",
        default=1e-4, min=1e-7, soft_max=0.01, precision=5, subtype='DISTANCE')
    root_mode: EnumProperty(
        name="Root", items=ROOT_ITEMS, default='PINNED',
        description="Whether the root bone of the chains keeps its place or may move to help reach the goals")
    method: EnumProperty(
        name="Method", items=METHOD_ITEMS, default=DEFAULT_METHOD_ITEM,
        description="The Sinew IK method that solves the goals")
    only_selected: BoolProperty(
        name="Only Selected Bones", default=False,
        description="Solve only the goals of selected bones: a goal counts when a bone of its chain, the bone "
                    "with the Sinew goal or IK constraint, or its target or pole bone (or a parent that carries it) "
                    "is selected; other goals are left out")

    def settings(self):
        # Blender keeps float properties in single precision: pass the value the user typed
        # (1e-4, not 9.99999974737875e-05), which is also what Export IK Problem writes.
        tolerance = float(f"{self.tolerance:.7g}")
        return pipeline.Settings(self.max_iterations, tolerance, self.root_mode.lower(), method=self.method.lower(),
                                 only_selected=self.only_selected)

    def draw_solver(self, layout):
        col = layout.column()
        col.prop(self, "method")
        col.prop(self, "max_iterations")
        col.prop(self, "tolerance")
        col.prop(self, "root_mode")


class SINEW_OT_solve(_SolverProps, bpy.types.Operator):
    bl_idname = "sinew.solve"
    bl_label = "Solve IK"
    bl_description = ("Solve the IK goals of the armatures in Pose Mode at the current frame with Sinew, from "
                      "the current pose; keys follow Auto Keying and its Only Active Keying Set and Only Insert "
                      "Available options")
    bl_options = {'REGISTER', 'UNDO'}

    use_keyframes: BoolProperty(
        name="Insert Keyframes",
        description="Key the bones the solve moved at the current frame, as Auto Keying would (through the "
                    "active keying set with Only Active Keying Set on); not set, it follows Auto Keying",
        default=False, options={'SKIP_SAVE'})

    @classmethod
    def poll(cls, context):
        return _poll_editable_armature(cls, context)

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(self, "use_keyframes")
        layout.prop(self, "only_selected")
        self.draw_solver(layout)

    def execute(self, context):
        if _engine_refused(self):
            return {'CANCELLED'}
        obs = _editable_armatures(self, context)
        if obs is None:
            return {'CANCELLED'}
        # As Blender's pose tools: keys only with Auto Keying on, unless asked either way.
        follows_auto_keying = not self.properties.is_property_set("use_keyframes")
        if follows_auto_keying:
            self.use_keyframes = context.scene.tool_settings.use_keyframe_insert_auto
        key = self.use_keyframes
        settings = self.settings()
        try:
            keying = keys.auto_keying(context) if key else None
            results, skipped, order_notes = pipeline.solve_poses(context, obs, settings, key=key, keying=keying)
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # a bug: never a traceback in the UI
            return _failed(self, ex)
        several = len(results) > 1
        for text in skipped:
            self.report({'INFO'}, f"Sinew: skipped: {text}")
        for text in order_notes:
            self.report({'INFO'}, f"Sinew: {text}")
        for res in results:
            ob, pre = res.problem.ob, _prefix(res.problem.ob, several)
            for w in res.problem.warnings:
                self.report({'WARNING'}, pre + w)
            if res.curve_warnings:
                self.report({'WARNING'}, f"Sinew: {pre}{res.curve_warnings}")
            note = pipeline.itasc_note(ob, settings)
            if note:
                self.report({'INFO'}, note)
            if res.problem.replaced:
                names = ", ".join(f'"{c}" (bone "{b}")' for b, c in res.problem.replaced)
                self.report({'INFO'}, f"Sinew: {pre}IK constraint(s) {names} stay on: Solve IK mutes nothing, so "
                                      "every other frame keeps its IK, and at this frame Blender's IK acts on top of "
                                      "the keyed pose (Bake IK to Keyframes mutes them)")
            if res.key_note:
                self.report({'INFO'}, f"Sinew: {pre}{res.key_note}")
            if res.held_note:
                self.report({'INFO'}, f"Sinew: {pre}{res.held_note}")
        if not key and follows_auto_keying:
            self.report({'INFO'}, "Sinew: the pose is set, not keyed (Auto Keying is off; turn Insert Keyframes on "
                                  "in the Adjust Last Operation panel to key it)")
        self.report(*combined_solve_report(results))
        for res in results:  # last, where the status bar shows it: the keys do not hold the pose
            if res.stretch_everywhere:
                self.report({'WARNING'}, f"Sinew: {_prefix(res.problem.ob, several)}{res.stretch_everywhere}")
            if res.unkeyed:
                self.report({'WARNING'}, f"Sinew: {_prefix(res.problem.ob, several)}{res.unkeyed}")
        return {'FINISHED'}


def solve_report(res):
    """(level, text) of one armature's solve: what Blender's evaluated pose reaches, after
    writing. Only the goals that miss are named (with by how much)."""
    level, body = _solve_report_body(res)
    return level, f"Sinew: {body}"


def combined_solve_report(results):
    """(level, text) for the solves of one or several armatures."""
    if len(results) == 1:
        return solve_report(results[0])
    parts = [_solve_report_body(res) for res in results]
    level = {'WARNING'} if any(lv == {'WARNING'} for lv, _ in parts) else {'INFO'}
    return level, (f"Sinew solved {len(results)} armatures: " +
                   "; ".join(f'"{res.problem.ob.name}": {body}' for res, (_lv, body) in zip(results, parts)))


def _solve_report_body(res):
    """Whether a goal is reached is decided in armature space (the solver's tolerance's); the
    distances given are Blender's evaluated pose's in world space, as the user sees them."""
    goals = res.problem.goals
    misses = res.misses
    shown = res.world_misses if res.world_misses is not None else misses
    worst = float(shown.max()) if shown is not None and shown.size else 0.0
    tail = f"{res.iterations} iterations, worst residual {worst:.6g}, {res.seconds * 1000:.1f} ms"
    if res.reached_in_blender:
        what = "1 goal reached" if len(goals) == 1 else f"all {len(goals)} goals reached"
        return {'INFO'}, f"{what}, {tail} ({res.goal_report()})"
    tol = pipeline.verify_tolerance(res.tolerance)
    ori = res.orientation_residuals
    missed = [(i, g.bone, float(w)) for i, (g, m, w) in enumerate(zip(goals, misses, shown)) if m > tol]

    def miss_text(i, bone, m):
        text = f'bone "{bone}" misses its target by {m:.6g}'
        if goals[i].use_orientation and i < len(ori):
            text += f" (orientation error {float(ori[i]) * 57.29577951308232:.3g}°)"
        return text

    what = ", ".join(miss_text(*t) for t in missed)
    reached = len(goals) - len(missed)
    others = f"; the other {_count(reached, 'goal')} reached" if reached else ""
    differs = [(g.bone, float(r)) for g, m, r in zip(goals, misses, res.residuals) if m > r + tol]
    if differs:
        sinew_says = ", ".join(f'"{b}" {r:.6g}' for b, r in differs)
        space = " in armature space" if pipeline.world_scales_distances(res.problem.ob) else ""
        return {'WARNING'}, (f"in Blender's evaluated pose {what}{others}, although Sinew's solution comes closer "
                             f"(its residuals{space}: {sinew_says}): something on the rig acts on top of the solved "
                             f"rotations{_see_warnings(res.problem.warnings)}; {tail}")
    return {'INFO'}, f"{what}{others} ({res.stop_reason}); {tail}"


def bake_report(r):
    """(level, text without the leading "Sinew ") of one armature's bake: timing, and the goals that missed with their worst
    distance and frame (or that every goal was reached). A goal that Sinew's solution reaches but
    Blender's evaluated pose misses at a checked frame is named as missed there (a WARNING)."""
    n = len(r.frames)
    per = r.seconds / max(n, 1)
    goals = pipeline.bake_goal_results(r)
    missed = [g for g in goals if g["missed"]]
    # A goal Sinew reached that Blender's evaluated pose misses is not reported as reached.
    off = [g for g in goals if not g["missed"] and g["blender_missed"]]
    checked_n = 0 if r.checked_frames is None else len(r.checked_frames)
    parts = [f'bone "{g["bone"]}" misses by up to {g["worst"]:.6g} at frame {g["frame"]} '
             f'({g["missed"]} of {_count(n, "frame")})' for g in missed]
    parts += [f'bone "{g["bone"]}" misses in Blender\'s evaluated pose by up to {g["blender"]:.6g} at frame '
              f'{g["blender_frame"]} ({g["blender_missed"]} of the {checked_n} checked frames), although Sinew\'s '
              "solution reaches it" for g in off]
    if parts:
        what = ", ".join(parts)
        reached = len(goals) - len(missed) - len(off)
        what += f"; the other {_count(reached, 'goal')} reached" if reached else ""
    else:
        what = "the goal reached on every frame" if len(goals) == 1 else f"all {len(goals)} goals reached on every frame"
    ori = [g for g in goals if g["orientation"] is not None]
    if ori:
        what += "; orientation error up to " + ", ".join(f'{g["orientation"]:.3g}° ("{g["bone"]}")' for g in ori)
    checked = ""
    if r.misses is not None:
        worst = float(r.misses.max()) if r.misses.size else 0.0
        checked = f"; Blender's evaluated pose checked at {len(r.checked_frames)} frames, worst miss {worst:.6g}"
    level = {'WARNING'} if off else {'INFO'}
    return level, (f"baked {_count(n, 'frame')} in {r.seconds:.2f} s ({per * 1000:.2f} ms/frame, solve "
                   f"{r.solve_seconds:.2f} s), worst residual {r.worst_residual:.6g}: {what}{checked}")


def _muted_outside_note(job, scene):
    """A warning when a bake muted IK constraints but covered only part of the scene's range: a
    mute holds on every frame, so the frames outside the baked range no longer show the IK (a QA
    pass: frames 15-25 baked of 1-40, and the tips at frames 5 and 35 ended 0.5-1 m off their
    targets without a word). None otherwise."""
    r = job.result
    if not r.muted or not len(r.frames):
        return None
    lo, hi = _scene_range(scene)
    first, last = int(r.frames[0]), int(r.frames[-1])
    if first <= lo and last >= hi:
        return None
    named = [f'"{c}" on "{b}"' for b, c in job.problem.replaced]
    names = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
    return (f"the IK constraints the bake replaced ({names}) are muted on every frame, so the frames outside "
            f"the baked {first}-{last} (the scene runs {lo}-{hi}) show the bones without their IK; bake the "
            "whole range, or bake with Keep IK Constraints on, or run Restore IK Constraints to turn them back on")


def _scene_range(scene):
    """The frames a bake covers by default: the preview range when it is on (as Bake Action),
    else the scene's."""
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


class SINEW_OT_bake(_SolverProps, bpy.types.Operator):
    bl_idname = "sinew.bake"
    bl_label = "Bake IK to Keyframes"
    bl_description = ("Solve the IK goals of the armatures in Pose Mode on every frame of a range with Sinew and "
                      "key the result, as Bake Action does for constraints")
    # No REGISTER, so no Adjust Last Operation panel: changing a setting there would silently bake
    # the whole range again. The dialog (invoke) is where the settings are made; UNDO undoes it.
    bl_options = {'UNDO'}

    frame_start: IntProperty(
        name="Start Frame", description="First frame to bake (default: the scene's, or its preview range)",
        min=MIN_FRAME, max=MAX_FRAME, options={'SKIP_SAVE'})
    frame_end: IntProperty(
        name="End Frame", description="Last frame to bake (default: the scene's, or its preview range)",
        min=MIN_FRAME, max=MAX_FRAME, options={'SKIP_SAVE'})
    new_action: BoolProperty(
        name="New Action",
        description="Bake into an action of its own, <object>_Sinew, that starts as a copy of the current one "
                    "(which is kept, with a fake user); baking again goes into that same action. Off: replace keys "
                    "inside the range of the current action",
        default=True)
    only_moved: BoolProperty(
        name="Only Moved Bones",
        description="Key only the bones the goals move (off: also every other bone's rotation channels that nothing "
                    "animates, with the value they hold)",
        default=True)
    keep_constraints: BoolProperty(
        name="Keep IK Constraints",
        description="Leave the Blender IK constraints Sinew replaced enabled (by default they are muted, so what you "
                    "see is what Sinew baked; Restore IK Constraints turns them back on)",
        default=False)
    # Key reduction (key_reduction.py). The angle is an ANGLE property: stored in radians (what
    # Settings.reduction_angle and key_reduction take), shown and typed in degrees.
    use_key_reduction: BoolProperty(
        name="Reduce Keys", default=False,
        description="After baking, remove the keys the animation does not need: the Bezier keys left keep every bone "
                    "within the angle below of the bake on every frame, and the root within the distance")
    reduction_angle: FloatProperty(
        name="Angle Tolerance", subtype='ANGLE', default=math.radians(0.1), min=0.0, soft_max=math.radians(5.0),
        precision=3, description="Largest rotation by which a bone may differ from the bake on any frame once keys "
                                 "are removed")
    reduction_distance: FloatProperty(
        name="Distance Tolerance", subtype='DISTANCE', default=1e-4, min=0.0, soft_max=0.01, precision=5,
        description="Largest distance by which the root bone's location may differ from the bake on any frame once "
                    "keys are removed")

    _job = None
    _timer = None
    _gen = None

    @classmethod
    def poll(cls, context):
        return _poll_editable_armature(cls, context)

    def settings(self):
        s = super().settings()
        s.key_reduction = self.use_key_reduction
        s.reduction_angle = float(self.reduction_angle)
        s.reduction_distance = float(f"{self.reduction_distance:.7g}")
        return s

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        col = layout.column(align=True)
        col.prop(self, "frame_start")
        col.prop(self, "frame_end", text="End")
        col = layout.column()
        col.prop(self, "method")
        col.prop(self, "only_selected")
        col.prop(self, "only_moved")
        col.prop(self, "new_action")
        col.prop(self, "keep_constraints")
        col = layout.column(heading="Key Reduction")
        col.prop(self, "use_key_reduction", text="Reduce Keys")
        sub = col.column(align=True)
        sub.active = self.use_key_reduction
        sub.prop(self, "reduction_angle", text="Angle")
        sub.prop(self, "reduction_distance", text="Distance")
        col = layout.column()
        col.prop(self, "max_iterations")
        col.prop(self, "tolerance")
        col.prop(self, "root_mode")

    def _range(self, context):
        start, end = _scene_range(context.scene)
        if self.properties.is_property_set("frame_start"):
            start = self.frame_start
        if self.properties.is_property_set("frame_end"):
            end = self.frame_end
        self.frame_start, self.frame_end = start, end
        return start, end

    def _make_batch(self, context, obs):
        start, end = self._range(context)
        jobs, skipped = pipeline.make_bake_jobs(context, obs, start, end, self.settings(), new_action=self.new_action,
                                                only_moved=self.only_moved, keep_constraints=self.keep_constraints)
        return pipeline.BakeBatch(jobs), skipped

    # Share of the progress bar for reading the constraints' influences frame by frame (when a
    # driver or NLA strip animates them); the bake itself gets the rest.
    READ_SHARE = 0.3

    def _modal_steps(self, context, obs):
        """The whole modal bake as one generator of progress in [0, 1]: reading the influences
        (``pipeline.bake_jobs_steps``, which may step every frame), then the batch's steps. Sets
        ``self._job`` and ``self._skipped`` once the jobs are made. Closing it (Esc) leaves the
        scene as it was (the reading puts the frame and pose back; ``modal`` cancels the batch)."""
        start, end = self._range(context)
        reading = pipeline.bake_jobs_steps(context, obs, start, end, self.settings(), new_action=self.new_action,
                                           only_moved=self.only_moved, keep_constraints=self.keep_constraints,
                                           chunk=10)
        share = 0.0
        try:
            while True:
                try:
                    progress = next(reading)
                except StopIteration as done:
                    jobs, self._skipped = done.value
                    break
                share = self.READ_SHARE  # (nothing is yielded when no frame is stepped)
                yield share * progress
        finally:
            reading.close()  # Esc: the reading puts the frame and pose back now
        self._job = pipeline.BakeBatch(jobs)
        # (Esc closes the batch's steps then and there: a scratch write is taken back at once.)
        yield from pipeline.rescaled(self._job.steps(), share, 1.0 - share)

    def invoke(self, context, event):
        # As Bake Action: a dialog with the range (the scene's) and the options; baking starts on OK.
        if _engine_refused(self):
            return {'CANCELLED'}
        self._range(context)
        if context.window is None:
            return self.execute(context)
        return context.window_manager.invoke_props_dialog(self, width=340, title="Bake IK to Keyframes",
                                                          confirm_text="Bake")

    def execute(self, context):
        if _engine_refused(self):
            return {'CANCELLED'}
        obs = _editable_armatures(self, context)
        if obs is None:
            return {'CANCELLED'}
        modal = self.options.is_invoke and context.window is not None and not bpy.app.background
        if modal:
            return self._start_modal(context, obs)
        try:
            batch, skipped = self._make_batch(context, obs)
            batch.run()
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # a bug: the jobs put the scene back; never a traceback in the UI
            return _failed(self, ex)
        self._finish(batch, skipped)
        return {'FINISHED'}

    def _finish(self, batch, skipped):
        jobs = batch.jobs
        several = len(jobs) > 1
        for text in skipped:
            self.report({'INFO'}, f"Sinew: skipped: {text}")
        for text in batch.order.notes([job.problem for job in jobs], "baked"):
            self.report({'INFO'}, f"Sinew: {text}")
        missed_total = 0
        for job in jobs:
            r, pre = job.result, _prefix(job.ob, several)
            for w in r.warnings:
                self.report({'WARNING'}, pre + w)
            note = pipeline.itasc_note(job.ob, job.settings)
            if note:
                self.report({'INFO'}, note)
            if r.action_note:
                self.report({'INFO'}, pre + r.action_note)
            if r.influence_note:
                self.report({'INFO'}, f"Sinew: {pre}{r.influence_note}")
            if r.held_note:
                self.report({'INFO'}, f"Sinew: {pre}{r.held_note}")
            outside = _muted_outside_note(job, bpy.context.scene)
            if outside:
                self.report({'WARNING'}, f"Sinew: {pre}{outside}")
            pipeline.store_bake_results(job.ob, r, job.settings)
            missed_total += sum(1 for g in pipeline.bake_goal_results(r) if g["missed"] or g["blender_missed"])
            level, text = bake_report(r)
            self.report(level, f'Sinew: "{job.ob.name}" {text}' if several else f"Sinew {text}")
            if r.reduction is not None:
                self.report({'INFO'}, f"Sinew: {pre}{r.reduction.report()}")
            missed = r.blender_misses
            if missed:
                goals = job.problem.goals
                frames = sorted({f for f, _i, _m in missed})
                f, i, m = missed[0]
                self.report({'WARNING'}, f"Sinew: {pre}Blender's evaluated pose misses targets at {len(frames)} of "
                                         f"the {len(r.checked_frames)} checked frames (worst: bone \"{goals[i].bone}\" "
                                         f"by {m:.6g} at frame {f}); something on the rig acts on top of the baked "
                                         f"keys{_see_warnings(r.warnings)}")
        if several:
            r0 = jobs[0].result
            names = ", ".join(f'"{job.ob.name}"' for job in jobs)
            what = f"{_count(missed_total, 'goal')} missed (see above)" if missed_total else "every goal reached"
            self.report({'INFO'}, f"Sinew baked {len(jobs)} armatures ({names}) over frames {int(r0.frames[0])} to "
                                  f"{int(r0.frames[-1])} in {sum(job.result.seconds for job in jobs):.2f} s: {what}")

    def _start_modal(self, context, obs):
        """Starts the bake in the modal loop, progress bar up at once: everything that may step
        frames (reading the influences, sampling, solving) runs in its steps."""
        self._job, self._skipped = None, []
        self._gen = self._modal_steps(context, obs)
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
            if self._job is not None:
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
        except Exception as ex:  # ReadError, or a bug: either way stop cleanly (the jobs restored the scene)
            self._cleanup(context)
            if isinstance(ex, ReadError):
                self.report({'ERROR'}, str(ex))
                return {'CANCELLED'}
            return _failed(self, ex)
        context.window_manager.progress_update(int(progress * 100))
        context.workspace.status_text_set(f"Sinew: baking… {progress * 100:.0f}% (Esc to cancel)")
        if self._job is not None and self._job.done:
            self._gen.close()  # (at its last step, after the writes: closing it changes nothing)
            self._cleanup(context)
            self._finish(self._job, self._skipped)
            return {'FINISHED'}
        return {'RUNNING_MODAL'}


def solve_ik_settings(context) -> pipeline.Settings:
    """The settings Solve IK would use if run now: its last-used iterations, tolerance, root and
    Only Selected Bones, which Blender keeps for the next run (defaults until it has run)."""
    return _SolverProps.settings(context.window_manager.operator_properties_last(SINEW_OT_solve.bl_idname))


def compare_report(doc):
    """(level, text) of a comparison: the fastest method that reached every goal, and how many
    reached, missed or do not apply (the sidebar's Method Comparison panel lists them)."""
    rows = doc["methods"]
    reached = sum(1 for r in rows if r["reached"] and not r["failed"])
    na = [r["method"] for r in rows if r["unsupported"]]
    failed = [r["method"] for r in rows if r["failed"]]
    missed = len(rows) - reached - len(na) - len(failed)
    best = next((r for r in rows if r["method"] == doc["best"]), None)
    lead = "no method reached every goal"
    if best is not None:
        lead = (f"fastest to reach {'the goal' if doc['goals'] == 1 else 'every goal'}: {best['method']} "
                f"({best['ms']:.3g} ms, {_count(best['iterations'], 'iteration')})")
    parts = [f"{reached} reached"] + ([f"{missed} missed"] if missed else [])
    parts += [f"not applicable: {', '.join(na)}"] if na else []
    parts += [f"failed: {', '.join(failed)}"] if failed else []
    level = {'WARNING'} if failed else {'INFO'}
    return level, (f'Sinew compared {_count(len(rows), "method")} on "{doc["armature"]}" at frame {doc["frame"]}: '
                   f"{lead}; {', '.join(parts)} (sidebar: Method Comparison); the pose is unchanged")


class SINEW_OT_compare_methods(bpy.types.Operator):
    bl_idname = "sinew.compare_methods"
    bl_label = "Compare IK Methods"
    bl_description = ("Solve the active armature's IK goals at the current frame with every Sinew method, as Solve "
                      "IK would, and list each one's error, iterations and time in the sidebar; the pose is not "
                      "changed")
    # Read-only, as Blender's Copy Global Transform: it changes no data, so it pushes no undo step
    # (and has no redo panel). The settings are Solve IK's (solve_ik_settings).
    bl_options = {'REGISTER'}

    @classmethod
    def poll(cls, context):
        return _poll_editable_armature(cls, context)

    def execute(self, context):
        if _engine_refused(self):
            return {'CANCELLED'}
        ob = _active_armature(context)
        if ob is None:
            self.report({'ERROR'}, "The active object is not an armature")
            return {'CANCELLED'}
        try:
            doc = pipeline.compare_methods(context, ob, solve_ik_settings(context))
        except ReadError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # a bug: never a traceback in the UI
            return _failed(self, ex)
        pipeline.store_compare_results(ob, doc)
        for area in (context.screen.areas if context.screen is not None else ()):
            if area.type == 'VIEW_3D':
                area.tag_redraw()
        self.report(*compare_report(doc))
        return {'FINISHED'}


class SINEW_OT_restore_constraints(bpy.types.Operator):
    bl_idname = "sinew.restore_constraints"
    bl_label = "Restore IK Constraints"
    bl_description = ("Turn back on exactly the Blender IK constraints that Sinew bakes muted on the armatures "
                      "in Pose Mode")
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        if not _poll_editable_armature(cls, context):
            return False
        if not any(keys.muted_records(ob) for ob in armatures(context)):
            cls.poll_message_set("Sinew has not muted any IK constraint of this armature")
            return False
        return True

    def execute(self, context):
        obs = [ob for ob in armatures(context) if ob.is_editable]
        if not obs:
            self.report({'ERROR'}, "The active object is not an editable armature")
            return {'CANCELLED'}
        several = len(obs) > 1
        turned_on, n_kept, n_forgotten = [], 0, 0
        try:
            for ob in obs:
                done = keys.restore_constraints(ob)
                pre = _prefix(ob, several)
                for text in done.kept:
                    self.report({'WARNING'}, f"Sinew: {pre}{text}")
                for text in done.forgotten:
                    self.report({'INFO'}, f"Sinew: {pre}{text}")
                turned_on += [pre + t for t in done.turned_on]
                n_kept += len(done.kept)
                n_forgotten += len(done.forgotten)
        except Exception as ex:
            return _failed(self, ex)
        self.report(*restore_report(turned_on, n_kept, n_forgotten))
        return {'FINISHED'}


def restore_report(turned_on, n_kept, n_forgotten):
    """(level, text) of Restore IK Constraints: the constraints it turned back on, and a warning
    while it keeps records of constraints it did not find. "Already on" only when it found every
    constraint it had muted and each was on."""
    done = (f"turned {len(turned_on)} IK constraint(s) back on: {', '.join(turned_on)}" if turned_on
            else "turned no IK constraint back on")
    if n_kept:
        records = "its record" if n_kept == 1 else "their records"
        return {'WARNING'}, (f"Sinew: {done}; it did not find {_count(n_kept, 'IK constraint')} it muted (see the "
                             f"warnings) and keeps {records}, so Restore IK Constraints can run again")
    if turned_on or n_forgotten:
        return {'INFO'}, f"Sinew: {done}"
    return {'INFO'}, "Sinew: the IK constraints it muted are already on"


class SINEW_OT_export_problem(_SolverProps, bpy.types.Operator, ExportHelper):
    bl_idname = "sinew.export_problem"
    bl_label = "Export IK Problem"
    bl_description = ("Write the exact IK problem Sinew would solve for the active armature at the current frame "
                      "to a JSON file (the sinew.problem format), for example for a bug report")
    bl_options = {'REGISTER'}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={'HIDDEN'}, description="Files the file browser lists")

    @classmethod
    def poll(cls, context):
        if _active_armature(context) is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        return True

    def draw(self, context):
        # Every option here goes into the file (which goals, and the solver settings it records).
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        layout.prop(self, "only_selected")
        self.draw_solver(layout)

    def invoke(self, context, event):
        # Refused before the file browser opens, not after a file is picked.
        if _engine_refused(self):
            return {'CANCELLED'}
        return super().invoke(context, event)

    def execute(self, context):
        if _engine_refused(self):
            return {'CANCELLED'}
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
        # (Strict JSON, made before the file is opened: a value that is not a finite number would
        # be written as a bare NaN, which no JSON reader takes. Reading the rig refuses those it
        # knows of, naming them; one that gets past is named by its place in the document.)
        bad = non_finite_at(doc)
        if bad is not None:
            self.report({'ERROR'}, f"Sinew: the problem holds a value that is not a finite number at {bad}, which "
                                   "JSON cannot hold; nothing was written. Please report this")
            return {'CANCELLED'}
        text = json.dumps(doc, indent=1, allow_nan=False)
        try:
            with open(self.filepath, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as ex:
            self.report({'ERROR'}, f"Could not write {self.filepath}: {ex}")
            return {'CANCELLED'}
        self.report({'INFO'}, f"Wrote {len(doc['bones'])} bones and {len(doc['goals'])} goals to {self.filepath}")
        return {'FINISHED'}


def non_finite_at(doc, where: str = "the document") -> str | None:
    """Where in JSON-like ``doc`` (dicts, lists, numbers, strings) the first float that is NaN or
    infinite is, as a path (``goals[0].pole.angle``); None when there is none."""
    if isinstance(doc, float):
        return None if math.isfinite(doc) else where
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        at = non_finite_at(value, f"{where}[{key}]" if isinstance(key, int) else
                           (key if where == "the document" else f"{where}.{key}"))
        if at is not None:
            return at
    return None


# -- Menus ------------------------------------------------------------------------------------
# Pose > Inverse Kinematics (VIEW3D_MT_pose_ik) gets Solve IK, Restore IK Constraints and Compare
# IK Methods; the Animation menu (VIEW3D_MT_object_animation: Pose > Animation in Pose Mode,
# Object > Animation in Object Mode) gets the bake, next to Bake Action. Once each, and F3 finds
# them there. Export IK Problem, which changes nothing, is in the sidebar and F3.


def menu_pose_ik(self, context):
    layout = self.layout
    layout.separator()
    layout.operator(SINEW_OT_solve.bl_idname)
    layout.operator(SINEW_OT_restore_constraints.bl_idname)
    layout.operator(SINEW_OT_compare_methods.bl_idname)


def menu_animation(self, context):
    ob = context.active_object
    if ob is None or ob.type != 'ARMATURE':
        return
    layout = self.layout
    layout.separator()
    layout.operator(SINEW_OT_bake.bl_idname, text="Bake IK to Keyframes...")


MENUS = (("VIEW3D_MT_pose_ik", menu_pose_ik), ("VIEW3D_MT_object_animation", menu_animation))

classes = (SINEW_OT_solve, SINEW_OT_bake, SINEW_OT_compare_methods, SINEW_OT_restore_constraints,
           SINEW_OT_export_problem)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    for menu, fn in MENUS:
        getattr(bpy.types, menu).append(fn)


def unregister():
    for menu, fn in reversed(MENUS):
        getattr(bpy.types, menu).remove(fn)
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
