# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew's per-bone settings (``pose_bone.sinew``).

A pose bone can carry one Sinew goal (a target object, or an armature plus one of its bones) and
joint limits for the engine (a four-angle cone, a twist range, a lock, a stiffness). None of this
is needed for a rig that already has Blender IK constraints and IK limits: those are imported as
they are (see ``rig_reader``); Sinew settings take precedence where both exist.
"""

import math

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

# Every Sinew setting can be changed on a library override of a linked rig (and the change is
# saved with the override): the pose bone's ``sinew`` pointer and each property in the group.
OVERRIDABLE = {'LIBRARY_OVERRIDABLE'}


# What a Sinew goal asks (the engine's goal kinds, Jack's: rig_reader.KINDS names them for the
# engine). Line, Plane and Half-Space take their direction or normal from an axis of the target
# (goal_axis); Aim points an axis of the bone itself (aim_axis) at the target.
GOAL_KINDS = (
    ('POSITION', "Position", "Pull the effector onto the target (and match its rotation with Rotation on)"),
    ('ORIENTATION', "Orientation", "Match the target's rotation only; the effector may go anywhere"),
    ('AIM', "Aim", "Point an axis of the bone at the target; the turn about that axis stays free"),
    ('LINE', "Line", "Keep the effector on the line through the target along one of its axes"),
    ('PLANE', "Plane", "Keep the effector on the plane through the target across one of its axes"),
    ('HALF_SPACE', "Half-Space", "Keep the effector on the side of the target's plane its axis points to, "
                                 "free otherwise (a floor)"),
)

AXES = (
    ('X', "X", "The +X axis"),
    ('Y', "Y", "The +Y axis"),
    ('Z', "Z", "The +Z axis"),
    ('NEG_X', "-X", "The -X axis"),
    ('NEG_Y', "-Y", "The -Y axis"),
    ('NEG_Z', "-Z", "The -Z axis"),
)


class SinewBoneSettings(bpy.types.PropertyGroup):
    """Sinew IK settings of one pose bone."""

    # --- Goal -----------------------------------------------------------------------------
    use_goal: BoolProperty(
        name="Goal",
        description="Make this bone an IK effector that Sinew pulls onto a target",
        default=False,
        override=OVERRIDABLE,
    )
    target: PointerProperty(
        name="Target",
        type=bpy.types.Object,
        description="Object the effector goes to (for an armature, optionally one of its bones; for a mesh, one of "
                    "its vertex groups)",
        override=OVERRIDABLE,
    )
    subtarget: StringProperty(
        name="Bone / Vertex Group",
        description="Bone of the target armature whose head is the target, or vertex group of the target mesh whose "
                    "weighted centre is, as Blender's constraints place it (empty: the object's origin)",
        override=OVERRIDABLE,
    )
    goal_kind: EnumProperty(
        name="Kind",
        description="What the goal asks of the effector",
        items=GOAL_KINDS,
        default='POSITION',
        override=OVERRIDABLE,
    )
    goal_axis: EnumProperty(
        name="Axis",
        description="Axis of the target (or its bone) that is the line's direction or the plane's normal",
        items=AXES,
        default='Z',
        override=OVERRIDABLE,
    )
    aim_axis: EnumProperty(
        name="Bone Axis",
        description="Axis of this bone that points at the target (Y runs along the bone)",
        items=AXES,
        default='Y',
        override=OVERRIDABLE,
    )
    use_tail: BoolProperty(
        name="Use Tail",
        description="Pull the bone's tail onto the target (off: its head)",
        default=True,
        override=OVERRIDABLE,
    )
    weight: FloatProperty(
        name="Weight",
        description="Importance of this goal where goals compete for the same bones",
        default=1.0,
        min=0.001,
        max=1e6,  # (the engine takes up to 1e12; a typed 1e20 is clamped here instead of refused by goal index)
        soft_max=10.0,
        override=OVERRIDABLE,
    )
    use_orientation: BoolProperty(
        name="Rotation",
        description="Also match the target's rotation with the effector bone",
        default=False,
        override=OVERRIDABLE,
    )
    chain_length: IntProperty(
        name="Chain Length",
        description="How many bones the goal may move, from this one up (from its parent up when Use Tail "
                    "is off), 0: up to the root",
        default=0,
        min=0,
        max=255,
        override=OVERRIDABLE,
    )
    pole_target: PointerProperty(
        name="Pole Target",
        type=bpy.types.Object,
        description="Object the chain's bend plane turns toward (for an armature, optionally one of its bones; for a "
                    "mesh, one of its vertex groups)",
        override=OVERRIDABLE,
    )
    pole_subtarget: StringProperty(
        name="Pole Bone / Vertex Group",
        description="Bone of the pole armature whose head is the pole, or vertex group of the pole mesh whose weighted "
                    "centre is",
        override=OVERRIDABLE,
    )
    pole_angle: FloatProperty(
        name="Pole Angle",
        description="Extra rotation of the chain about its axis after aiming at the pole",
        subtype='ANGLE',
        default=0.0,
        min=-math.pi,
        max=math.pi,
        override=OVERRIDABLE,
    )

    # --- Limits ---------------------------------------------------------------------------
    use_cone: BoolProperty(
        name="Cone",
        description=("Limit how far the bone may swing, per quadrant (replaces Blender's IK lock or limit on X and Z; "
                     "Blender's on Y stays)"),
        default=False,
        override=OVERRIDABLE,
    )
    cone_x_pos: FloatProperty(
        name="+X", description="Largest swing about +X (toward +Z)",
        subtype='ANGLE', default=math.radians(45.0), min=0.0, max=math.pi,
        override=OVERRIDABLE,
    )
    cone_x_neg: FloatProperty(
        name="-X", description="Largest swing about -X (toward -Z)",
        subtype='ANGLE', default=math.radians(45.0), min=0.0, max=math.pi,
        override=OVERRIDABLE,
    )
    cone_z_pos: FloatProperty(
        name="+Z", description="Largest swing about +Z (toward -X)",
        subtype='ANGLE', default=math.radians(45.0), min=0.0, max=math.pi,
        override=OVERRIDABLE,
    )
    cone_z_neg: FloatProperty(
        name="-Z", description="Largest swing about -Z (toward +X)",
        subtype='ANGLE', default=math.radians(45.0), min=0.0, max=math.pi,
        override=OVERRIDABLE,
    )
    use_twist: BoolProperty(
        name="Twist",
        description=("Limit the twist about the bone's own axis (replaces Blender's IK lock or limit on Y; Blender's "
                     "on X and Z stay)"),
        default=False,
        override=OVERRIDABLE,
    )
    twist_min: FloatProperty(
        name="Min", description="Smallest twist about the bone's Y axis",
        subtype='ANGLE', default=math.radians(-45.0), min=-math.pi, max=math.pi,
        override=OVERRIDABLE,
    )
    twist_max: FloatProperty(
        name="Max", description="Largest twist about the bone's Y axis",
        subtype='ANGLE', default=math.radians(45.0), min=-math.pi, max=math.pi,
        override=OVERRIDABLE,
    )
    lock: BoolProperty(
        name="Lock",
        description="The solver never rotates this bone",
        default=False,
        override=OVERRIDABLE,
    )
    stiffness: FloatProperty(
        name="Stiffness",
        description="Resistance to rotation (0: free); overrides Blender's IK stiffness when above 0",
        default=0.0,
        min=0.0,
        max=0.99,
        override=OVERRIDABLE,
    )

    # --- What a bake switched off ------------------------------------------------------------
    # The IK constraints of this bone that Sinew bakes muted, for Restore IK Constraints
    # (keys.muted_records): JSON, a list of {"constraint", "how": "mute" | "influence",
    # "influence"}. Kept on the bone, not by its name, so that it follows the bone when the bone
    # is renamed.
    muted_constraints: StringProperty(
        name="Muted IK Constraints", description="IK constraints of this bone a Sinew bake muted (for Restore IK "
                                                 "Constraints)",
        default="", options={'HIDDEN'}, override=OVERRIDABLE,
    )


classes = (SinewBoneSettings,)


@bpy.app.handlers.persistent
def _store_bone_settings(*_args):
    """Before a save: gives every pose bone of every local armature its Sinew settings in the
    file (reading ``pose_bone.sinew`` creates them, with the defaults). A library override can
    only keep changes to settings its library file has: without this, Sinew settings changed on
    an overridden bone the library never gave any would be lost on reload."""
    for ob in bpy.data.objects:
        if ob.type == 'ARMATURE' and ob.library is None and ob.override_library is None and ob.pose is not None:
            for pb in ob.pose.bones:
                pb.sinew.use_goal  # noqa: B018  (the read creates the settings)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.app.handlers.save_pre.append(_store_bone_settings)
    bpy.types.PoseBone.sinew = PointerProperty(type=SinewBoneSettings, name="Sinew",
                                               description="Sinew IK goal and limits of this bone",
                                               override=OVERRIDABLE)
    # What a bake muted is kept on each pose bone (SinewBoneSettings.muted_constraints). Here: the
    # records of bones that are not there any more by that name (and, from files of Sinew 0.1.0
    # before that, all of them), by bone name: JSON, a list of {"bone", "constraint", "how",
    # "influence"} (keys.muted_records).
    bpy.types.Object.sinew_muted = StringProperty(
        name="Sinew Muted Constraints", description="IK constraints a Sinew bake muted (for Restore IK Constraints)",
        default="", options={'HIDDEN'}, override=OVERRIDABLE)
    # The last bake's per-goal results (pipeline.store_bake_results), for the sidebar: JSON.
    bpy.types.Object.sinew_last_bake = StringProperty(
        name="Sinew Last Bake", description="Per-goal results of the last Sinew bake of this armature",
        default="", options={'HIDDEN'}, override=OVERRIDABLE)
    # A bake's action remembers the user's action it started from (keys.prepare_action), so the
    # next bake replaces it instead of piling up copies.
    bpy.types.Action.sinew_baked = BoolProperty(
        name="Sinew Bake", description="This action was made by a Sinew bake", default=False, options={'HIDDEN'})
    bpy.types.Action.sinew_original = PointerProperty(
        type=bpy.types.Action, name="Original Action", description="The action this Sinew bake started from",
        options={'HIDDEN'})


def unregister():
    if _store_bone_settings in bpy.app.handlers.save_pre:
        bpy.app.handlers.save_pre.remove(_store_bone_settings)
    del bpy.types.Action.sinew_original
    del bpy.types.Action.sinew_baked
    del bpy.types.Object.sinew_last_bake
    del bpy.types.Object.sinew_muted
    del bpy.types.PoseBone.sinew
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
