/*
 * hardening.c: every export of libsinew called with NULL, misaligned, short, huge and
 * inconsistent arguments, and from several threads at once. Built with
 * -fsanitize=address,undefined by tests/c_hardening.rs (run with
 * ASAN_OPTIONS=allocator_may_return_null=1, as a real allocator returns NULL for a size it
 * cannot give). Every call must return a status (never crash, never read past a buffer, never
 * abort); a failing call must leave a message and NULL handle outputs; a successful solve must
 * give finite numbers.
 *
 *   cc -std=c11 -fsanitize=address,undefined -I ffi hardening.c -L <dir> -lsinew -lpthread
 *   ./a.out            prints "hardening: N checks passed" and exits 0, or names the failure
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinew.h"

static int checks = 0;

static void fail(int line, const char *what, sinew_status got, sinew_status want) {
    char message[512] = "";
    sinew_last_error_message(message, sizeof message);
    fprintf(stderr, "hardening.c:%d: %s: got %s, want %s (%s)\n", line, what, sinew_status_name(got),
            sinew_status_name(want), message);
    exit(1);
}

/* A call that must return `want`; a failure must leave a message for this thread. */
#define EXPECT(want, call)                                                          \
    do {                                                                            \
        sinew_status got_ = (call);                                                 \
        if (got_ != (want)) fail(__LINE__, #call, got_, (want));                    \
        if (got_ != SINEW_STATUS_OK && sinew_last_error_message(NULL, 0) == 0)      \
            fail(__LINE__, "no message after " #call, got_, (want));                \
        checks++;                                                                   \
    } while (0)

/* A call that must fail, with any status. */
#define REFUSED(call)                                                               \
    do {                                                                            \
        sinew_status got_ = (call);                                                 \
        if (got_ == SINEW_STATUS_OK) fail(__LINE__, #call, got_, SINEW_STATUS_OK);  \
        if (got_ == SINEW_STATUS_PANIC) fail(__LINE__, #call, got_, SINEW_STATUS_OK); \
        checks++;                                                                   \
    } while (0)

#define ASSERT(cond)                                                                \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "hardening.c:%d: %s\n", __LINE__, #cond);               \
            exit(1);                                                                \
        }                                                                           \
        checks++;                                                                   \
    } while (0)

static const char *CHAIN =
    "{\"format\": \"sinew.problem/1\", \"bones\": ["
    "{\"name\": \"a\", \"head\": [0,0,0], \"tail\": [0,0,1]},"
    "{\"name\": \"b\", \"parent\": \"a\", \"head\": [0,0,1], \"tail\": [0,0,2]},"
    "{\"name\": \"c\", \"parent\": \"b\", \"head\": [0,0,2], \"tail\": [0,0,3]}],"
    "\"goals\": [{\"bone\": \"c\", \"target\": [1, 0, 1.5]}]}";

enum { N = 3 };

/* An exactly sized heap copy, so that AddressSanitizer catches any read or write past it. */
static double *doubles(size_t n, double fill) {
    double *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = fill;
    return p;
}

static void all_finite(const double *v, size_t n) {
    for (size_t i = 0; i < n; i++) ASSERT(isfinite(v[i]));
}

static void rig_new_arguments(void) {
    const char **names = malloc(N * sizeof *names);
    names[0] = "a";
    names[1] = "b";
    names[2] = "c";
    int64_t *parents = malloc(N * sizeof *parents);
    parents[0] = -1;
    parents[1] = 0;
    parents[2] = 1;
    double *rest = doubles(16 * N, 0.0);
    for (int i = 0; i < N; i++) {
        rest[16 * i + 0] = rest[16 * i + 5] = rest[16 * i + 10] = rest[16 * i + 15] = 1.0;
        rest[16 * i + 7] = (double)i; /* head at y = i, bone along +Y */
    }
    double *lengths = doubles(N, 1.0);
    sinew_rig *rig = (sinew_rig *)1;

    EXPECT(SINEW_STATUS_OK, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    ASSERT(rig != NULL);
    sinew_rig_free(rig);

    /* One wrong length: compared with the others before any array is touched. */
    rig = (sinew_rig *)1;
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, (size_t)1 << 40, parents, N, rest, 16 * N, lengths, N, &rig));
    ASSERT(rig == NULL);
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, N + 2, parents, N, rest, 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, N, parents, N - 1, rest, 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, N, parents, N, rest, 16 * N - 1, lengths, N, &rig));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N + 1, &rig));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_rig_new(names, N, parents, SIZE_MAX, rest, 16 * N, lengths, N, &rig));
    /* Consistent but impossible lengths: refused (the copy cannot be allocated), never read. */
    size_t huge = (size_t)1 << 45;
    REFUSED(sinew_rig_new(names, huge, parents, huge, rest, 16 * huge, lengths, huge, &rig));
    REFUSED(sinew_rig_new(names, SIZE_MAX / 8, parents, SIZE_MAX / 8, rest, SIZE_MAX, lengths, SIZE_MAX / 8, &rig));
    ASSERT(rig == NULL);
    /* NULL and misaligned arrays and outputs. */
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(NULL, N, parents, N, rest, 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(names, N, NULL, N, rest, 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(names, N, parents, N, NULL, 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(names, N, parents, N, rest, 16 * N, NULL, N, &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, NULL));
    char *raw = malloc(16 * N * sizeof(double) + 8);
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER,
           sinew_rig_new(names, N, parents, N, (const double *)(void *)(raw + 1), 16 * N, lengths, N, &rig));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER,
           sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, (sinew_rig **)(void *)(raw + 1)));
    free(raw);
    EXPECT(SINEW_STATUS_INVALID_RIG, sinew_rig_new(names, 0, parents, 0, rest, 0, lengths, 0, &rig));
    /* Bad contents. */
    names[1] = NULL;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    names[1] = "\xff\xfe";
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    names[1] = "b";
    parents[2] = 2; /* its own parent */
    EXPECT(SINEW_STATUS_INVALID_RIG, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    parents[2] = INT64_MAX;
    EXPECT(SINEW_STATUS_INVALID_RIG, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    parents[2] = 1;
    rest[7] = 1e300;
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    rest[7] = NAN;
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    rest[7] = 0.0;
    lengths[1] = 1e300;
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    lengths[1] = -1.0;
    EXPECT(SINEW_STATUS_INVALID_RIG, sinew_rig_new(names, N, parents, N, rest, 16 * N, lengths, N, &rig));
    ASSERT(rig == NULL);
    free(names);
    free(parents);
    free(rest);
    free(lengths);
}

static void rig_functions(void) {
    sinew_rig *rig = (sinew_rig *)1;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_from_json(NULL, &rig));
    ASSERT(rig == NULL);
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_rig_from_json("\xff", &rig));
    EXPECT(SINEW_STATUS_PARSE_ERROR, sinew_rig_from_json("{", &rig));
    EXPECT(SINEW_STATUS_PARSE_ERROR, sinew_rig_from_json("", &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_from_json(CHAIN, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_rig_from_json(CHAIN, &rig));

    size_t count = 0, index = 0;
    int64_t parent = 0;
    const char *name = NULL;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_bone_count(NULL, &count));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_bone_count(rig, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_rig_bone_count(rig, &count));
    ASSERT(count == N);
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_rig_bone_name(rig, SIZE_MAX, &name));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_bone_name(rig, 0, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_bone_name(NULL, 0, &name));
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_rig_bone_parent(rig, N, &parent));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_bone_parent(rig, 0, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_rig_bone_parent(rig, 0, &parent));
    ASSERT(parent == -1);
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_find_bone(rig, NULL, &index));
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_rig_find_bone(rig, "\xc3", &index));
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_rig_find_bone(rig, "nope", &index));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_find_bone(rig, "b", NULL));

    double axis[3] = {1, 0, 0};
    char raw[32];
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_set_cone_limit(NULL, 1, 1, 1, 1, 1));
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_rig_set_cone_limit(rig, SIZE_MAX, 1, 1, 1, 1));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_cone_limit(rig, 1, 1e-300, 1, 1, 1));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_cone_limit(rig, 1, NAN, 1, 1, 1));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_cone_limit(rig, 1, 1e300, 1, 1, 1));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_cone_limit_blender(rig, 1, 1, -1, -1, 1));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_set_hinge_limit(rig, 1, NULL, 0, 1));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_rig_set_hinge_limit(rig, 1, (const double *)(void *)(raw + 1), 0, 1));
    axis[0] = 1e300;
    REFUSED(sinew_rig_set_hinge_limit(rig, 1, axis, 0, 1));
    axis[0] = 0;
    REFUSED(sinew_rig_set_hinge_limit(rig, 1, axis, 0, 1));
    axis[0] = 1;
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_hinge_limit(rig, 1, axis, 1, 0));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_twist_limit(rig, 1, -INFINITY, 0));
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_rig_set_locked(rig, 1, 2));
    EXPECT(SINEW_STATUS_LIMIT_OUT_OF_RANGE, sinew_rig_set_stiffness(rig, 1, 1.0));
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_rig_clear_limit(rig, N));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_rig_clear_limit(NULL, 0));
    EXPECT(SINEW_STATUS_OK, sinew_rig_set_hinge_limit(rig, 1, axis, -2, 2));
    EXPECT(SINEW_STATUS_OK, sinew_rig_set_cone_limit(rig, 2, 1e-6, 1, 1, 1));

    sinew_problem *problem = (sinew_problem *)1;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_new(NULL, 0, &problem));
    ASSERT(problem == NULL);
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_problem_new(rig, 7, &problem));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_new(rig, 0, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_problem_new(rig, 1, &problem));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_rig(problem, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_rig(NULL, rig));
    EXPECT(SINEW_STATUS_OK, sinew_problem_set_rig(problem, rig));
    sinew_problem_free(problem);
    sinew_rig_free(rig);
    sinew_rig_free(NULL);
    sinew_rig_free((sinew_rig *)(void *)(raw + 1)); /* misaligned: ignored */
}

static void problem_functions(void) {
    sinew_problem *problem = (sinew_problem *)1;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_from_json(NULL, &problem));
    ASSERT(problem == NULL);
    EXPECT(SINEW_STATUS_PARSE_ERROR, sinew_problem_from_json("[]", &problem));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_load_file(NULL, &problem));
    EXPECT(SINEW_STATUS_IO_ERROR, sinew_problem_load_file("/nonexistent/sinew.json", &problem));
    EXPECT(SINEW_STATUS_IO_ERROR, sinew_problem_load_file("/", &problem));
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(CHAIN, &problem));

    size_t count = 0, index = 0;
    const char *name = NULL;
    sinew_rig *rig = NULL;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_rig(NULL, &rig));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_rig(problem, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_bone_count(problem, NULL));
    EXPECT(SINEW_STATUS_UNKNOWN_BONE, sinew_problem_bone_name(problem, N, &name));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_goal_count(NULL, &count));
    EXPECT(SINEW_STATUS_OK, sinew_problem_goal_count(problem, &count));
    ASSERT(count == 1);

    sinew_goal goal;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_goal_default(NULL));
    EXPECT(SINEW_STATUS_OK, sinew_goal_default(&goal));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_get_goal(problem, 5, &goal));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_get_goal(problem, 0, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_add_goal(problem, NULL, &index));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_add_goal(NULL, &goal, &index));
    goal.bone = 1;
    goal.has_orientation = 2;
    EXPECT(SINEW_STATUS_INVALID_ARGUMENT, sinew_problem_add_goal(problem, &goal, &index));
    goal.has_orientation = 0;
    goal.bone = SIZE_MAX;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.bone = 1;
    goal.target[0] = 1e200;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.target[0] = NAN;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.target[0] = 0.5;
    goal.weight = 1e300;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.weight = 1.0;
    goal.has_pole = 1;
    goal.pole_target[1] = 1e300;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.has_pole = 0;
    goal.has_orientation = 1;
    goal.orientation[0] = 0;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_add_goal(problem, &goal, &index));
    goal.orientation[0] = 1e300; /* normalised safely */
    goal.orientation[2] = -1e300;
    EXPECT(SINEW_STATUS_OK, sinew_problem_add_goal(problem, &goal, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_problem_get_goal(problem, 1, &goal));
    ASSERT(fabs(goal.orientation[0] * goal.orientation[0] + goal.orientation[2] * goal.orientation[2] - 1.0) < 1e-12);

    double point[3] = {0.5, 0.5, 0.5};
    double quat[4] = {1, 0, 0, 0};
    char raw[64];
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_target(problem, 0, NULL));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_set_target(problem, 0, (const double *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_target(problem, 9, point));
    point[2] = 1e13;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_target(problem, 0, point));
    point[2] = 0.5;
    EXPECT(SINEW_STATUS_OK, sinew_problem_set_target(problem, 0, point));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_set_orientation(problem, 0, (const double *)(void *)(raw + 1)));
    quat[0] = INFINITY;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_orientation(problem, 0, quat));
    quat[0] = 1;
    EXPECT(SINEW_STATUS_OK, sinew_problem_set_orientation(problem, 0, NULL));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_pole_target(problem, 0, point)); /* no pole */
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_pole_target(problem, 0, NULL));
    /* Goal kinds: unknown kinds, zero, misaligned and missing vectors, bad outputs. */
    double normal[3] = {0, 0, 0};
    uint32_t kind = 99;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_goal_kind(NULL, 0, SINEW_GOAL_KIND_PLANE, point));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_goal_kind(problem, 0, 1000000, point));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_goal_kind(problem, 0, SINEW_GOAL_KIND_PLANE, normal));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_set_goal_kind(problem, 0, SINEW_GOAL_KIND_LINE, NULL));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_set_goal_kind(problem, 0, SINEW_GOAL_KIND_LINE, (const double *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_goal_kind(problem, 0, SINEW_GOAL_KIND_ORIENTATION, NULL));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_goal_kind(problem, 9, SINEW_GOAL_KIND_POSITION, NULL));
    normal[2] = NAN;
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_set_goal_kind(problem, 0, SINEW_GOAL_KIND_HALF_SPACE, normal));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_get_goal_kind(problem, 0, NULL, NULL));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_get_goal_kind(problem, 0, &kind, (double *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_INVALID_GOAL, sinew_problem_get_goal_kind(problem, 9, &kind, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_problem_get_goal_kind(problem, 0, &kind, NULL));
    ASSERT(kind == SINEW_GOAL_KIND_POSITION);

    sinew_settings settings;
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_settings(problem, NULL));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_settings(problem, (sinew_settings *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_OK, sinew_problem_settings(problem, &settings));
    double *rotations = doubles(4 * N, 0.0);
    double *short_rotations = doubles(4 * N - 1, 0.0);
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, sinew_problem_start_pose(problem, short_rotations, 4 * N - 1, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_start_pose(problem, NULL, 4 * N, NULL));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_problem_start_pose(problem, rotations, 4 * N, (double *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_OK, sinew_problem_start_pose(problem, rotations, 4 * N, NULL));
    free(rotations);
    free(short_rotations);

    /* The goal cap: a typed error, not a dense (3·G)² matrix. */
    EXPECT(SINEW_STATUS_OK, sinew_goal_default(&goal));
    goal.bone = 2;
    sinew_status last = SINEW_STATUS_OK;
    for (int i = 0; i < 300 && last == SINEW_STATUS_OK; i++) last = sinew_problem_add_goal(problem, &goal, NULL);
    ASSERT(last == SINEW_STATUS_INVALID_GOAL);
    EXPECT(SINEW_STATUS_OK, sinew_problem_goal_count(problem, &count));
    ASSERT(count == 256);
    EXPECT(SINEW_STATUS_OK, sinew_problem_clear_goals(problem));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_problem_clear_goals(NULL));
    sinew_problem_free(problem);
    sinew_problem_free(NULL);
}

static void solver_functions(void) {
    sinew_problem *problem = NULL;
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(CHAIN, &problem));
    sinew_settings settings;
    sinew_solver *solver = (sinew_solver *)1;
    char raw[64];
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_settings_default(NULL));
    EXPECT(SINEW_STATUS_OK, sinew_settings_default(&settings));
    settings.method = 10;
    EXPECT(SINEW_STATUS_INVALID_SETTING, sinew_solver_new(&settings, &solver));
    ASSERT(solver == NULL);
    settings.method = SINEW_METHOD_DLS;
    settings.max_iterations = 0;
    EXPECT(SINEW_STATUS_INVALID_SETTING, sinew_solver_new(&settings, &solver));
    settings.max_iterations = 50;
    settings.tolerance = -1;
    EXPECT(SINEW_STATUS_INVALID_SETTING, sinew_solver_new(&settings, &solver));
    settings.tolerance = 1e-6;
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_solver_new((const sinew_settings *)(void *)(raw + 1), &solver));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_new(&settings, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_solver_new(NULL, &solver));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_set_settings(solver, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_get_settings(solver, NULL));
    ASSERT(sinew_method_name(99) == NULL);
    ASSERT(sinew_stop_reason_name(99) == NULL);
    ASSERT(strcmp(sinew_status_name(9999), "SINEW_STATUS_UNKNOWN") == 0);

    double *rotations = doubles(4 * N, 0.0);
    double residual = 0, root[3];
    sinew_solve_info info;
    EXPECT(SINEW_STATUS_NO_SOLUTION, sinew_solver_rotations(solver, rotations, 4 * N));
    EXPECT(SINEW_STATUS_NO_SOLUTION, sinew_solver_info(solver, &info));
    EXPECT(SINEW_STATUS_NO_SOLUTION, sinew_solver_root_translation(solver, root));
    /* Start arrays: short, NULL with a length, huge, misaligned, non-finite, zero. */
    double *start = doubles(4 * N, 0.0);
    for (int i = 0; i < N; i++) start[4 * i] = 1.0;
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_solver_solve(solver, problem, start, 4 * N - 1, NULL, &info));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, sinew_solver_solve(solver, problem, start, SIZE_MAX, NULL, &info));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_solve(solver, problem, NULL, 5, NULL, &info));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_solver_solve(solver, problem, (const double *)(void *)(raw + 1), 4 * N, NULL, &info));
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER, sinew_solver_solve(solver, problem, NULL, 0, NULL, (sinew_solve_info *)(void *)(raw + 1)));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_solve(NULL, problem, NULL, 0, NULL, NULL));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_solve(solver, NULL, NULL, 0, NULL, NULL));
    start[4] = NAN;
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_solver_solve(solver, problem, start, 4 * N, NULL, &info));
    start[4] = 0.0;
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_solver_solve(solver, problem, start, 4 * N, NULL, &info));
    double far[3] = {1e300, 0, 0};
    EXPECT(SINEW_STATUS_NON_FINITE, sinew_solver_solve(solver, problem, NULL, 0, far, &info));
    /* A huge start quaternion is rescaled, not turned into NaN. */
    start[4] = 1e300;
    start[7] = 1e300;
    EXPECT(SINEW_STATUS_OK, sinew_solver_solve(solver, problem, start, 4 * N, NULL, &info));
    ASSERT(isfinite(info.worst_residual) && info.bone_count == N && info.goal_count == 1);
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, sinew_solver_rotations(solver, rotations, 4 * N - 1));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_rotations(solver, NULL, 4 * N));
    EXPECT(SINEW_STATUS_OK, sinew_solver_rotations(solver, rotations, 4 * N));
    all_finite(rotations, 4 * N);
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, sinew_solver_residuals(solver, &residual, 0));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_residuals(solver, NULL, 1));
    EXPECT(SINEW_STATUS_OK, sinew_solver_residuals(solver, &residual, 1));
    ASSERT(isfinite(residual));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT, sinew_solver_root_translation(solver, NULL));
    EXPECT(SINEW_STATUS_OK, sinew_solver_info(solver, &info));

    /* Sequences. F frames of one goal. */
    enum { F = 4 };
    double *targets = doubles(F * 3, 0.5);
    double *orientations = doubles(F * 4, NAN); /* the goal has none: ignored */
    double *poles = doubles(F * 3, 0.0);       /* zero, and the goal has none: ignored */
    double *out_rot = doubles(F * N * 4, 0.0);
    double *out_root = doubles(F * 3, 0.0);
    double *out_res = doubles(F, 0.0);
    sinew_solve_info *infos = malloc(F * sizeof *infos);
#define SEQ(frames_, tl_, ol_, pl_, rl_, rootl_, resl_, infl_)                                             \
    sinew_solver_solve_sequence(solver, problem, NULL, 0, NULL, (frames_), targets, (tl_), orientations, (ol_), \
                                poles, (pl_), out_rot, (rl_), out_root, (rootl_), out_res, (resl_), infos, (infl_))
    EXPECT(SINEW_STATUS_OK, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F));
    all_finite(out_rot, F * N * 4);
    all_finite(out_res, F);
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, SEQ(F, F * 3 - 1, F * 4, F * 3, F * N * 4, F * 3, F, F));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, SEQ(F, F * 3, F * 4 + 1, F * 3, F * N * 4, F * 3, F, F));
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, SEQ(F, F * 3, F * 4, 1, F * N * 4, F * 3, F, F));
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4 - 1, F * 3, F, F));
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3 - 1, F, F));
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3, F - 1, F));
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F - 1));
    /* More frames than the buffers hold, lengths claimed to match: a length check, no read. */
    EXPECT(SINEW_STATUS_SHAPE_MISMATCH, SEQ((size_t)1 << 40, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F));
    REFUSED(SEQ(SIZE_MAX / 2, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F));
    targets[4] = 1e300;
    EXPECT(SINEW_STATUS_INVALID_GOAL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F));
    targets[4] = NAN;
    EXPECT(SINEW_STATUS_INVALID_GOAL, SEQ(F, F * 3, F * 4, F * 3, F * N * 4, F * 3, F, F));
    targets[4] = 0.5;
    EXPECT(SINEW_STATUS_MISALIGNED_POINTER,
           sinew_solver_solve_sequence(solver, problem, NULL, 0, NULL, F, (const double *)(void *)(raw + 1), F * 3, NULL, 0,
                                       NULL, 0, out_rot, F * N * 4, out_root, F * 3, out_res, F, NULL, 0));
    EXPECT(SINEW_STATUS_NULL_ARGUMENT,
           sinew_solver_solve_sequence(solver, problem, NULL, 0, NULL, F, targets, F * 3, NULL, 0, NULL, 0, NULL,
                                       F * N * 4, out_root, F * 3, out_res, F, NULL, 0));

    /* No goals: a billion frames are asked for, the buffers hold four: refused before any work. */
    sinew_problem *empty = NULL;
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(CHAIN, &empty));
    EXPECT(SINEW_STATUS_OK, sinew_problem_clear_goals(empty));
    EXPECT(SINEW_STATUS_BUFFER_TOO_SMALL,
           sinew_solver_solve_sequence(solver, empty, NULL, 0, NULL, 1000000000, NULL, 0, NULL, 0, NULL, 0, out_rot,
                                       F * N * 4, out_root, F * 3, NULL, 0, NULL, 0));
    EXPECT(SINEW_STATUS_OK, sinew_solver_solve_sequence(solver, empty, NULL, 0, NULL, F, NULL, 0, NULL, 0, NULL, 0, out_rot,
                                                        F * N * 4, out_root, F * 3, NULL, 0, NULL, 0));
    sinew_problem_free(empty);
#undef SEQ
    free(targets);
    free(orientations);
    free(poles);
    free(out_rot);
    free(out_root);
    free(out_res);
    free(infos);
    free(start);
    free(rotations);
    sinew_solver_free(solver);
    sinew_solver_free(NULL);
    sinew_problem_free(problem);
}

static void error_messages(void) {
    char small[4];
    sinew_rig *rig = NULL;
    EXPECT(SINEW_STATUS_PARSE_ERROR, sinew_rig_from_json("{", &rig));
    size_t need = sinew_last_error_message(NULL, 0);
    ASSERT(need > 1);
    ASSERT(sinew_last_error_message(small, sizeof small) == need);
    ASSERT(small[3] == '\0');
    ASSERT(sinew_last_error_message(small, 0) == need);
    ASSERT(strlen(sinew_version()) > 0 && (sinew_abi_version() >> 16) == SINEW_ABI_VERSION_MAJOR);
}

/* Threads: each has its own solver on one shared problem, solves warm-started frames, and checks
 * that its error messages are its own. */
typedef struct {
    const sinew_problem *problem;
    int id;
    int ok;
    double first[4 * N];
} worker;

static void *work(void *arg) {
    worker *w = arg;
    sinew_settings settings;
    sinew_solver *solver = NULL;
    if (sinew_settings_default(&settings) != SINEW_STATUS_OK) return NULL;
    settings.method = (uint32_t)(w->id % 2);
    if (sinew_solver_new(&settings, &solver) != SINEW_STATUS_OK) return NULL;
    double rotations[4 * N];
    sinew_solve_info info;
    for (int frame = 0; frame < 200; frame++) {
        if (sinew_solver_solve(solver, w->problem, frame ? rotations : NULL, frame ? 4 * N : 0, NULL, &info) != SINEW_STATUS_OK)
            goto out;
        if (sinew_solver_rotations(solver, rotations, 4 * N) != SINEW_STATUS_OK) goto out;
        for (int i = 0; i < 4 * N; i++)
            if (!isfinite(rotations[i])) goto out;
        if (frame == 0) memcpy(w->first, rotations, sizeof rotations);
        /* An error on this thread, then a success: the message is this thread's own. */
        sinew_rig *rig = NULL;
        char json[64];
        snprintf(json, sizeof json, "{\"thread\": %d", w->id);
        if (sinew_rig_from_json(json, &rig) != SINEW_STATUS_PARSE_ERROR || rig != NULL) goto out;
        char message[256] = "";
        sinew_last_error_message(message, sizeof message);
        if (strstr(message, "EOF") == NULL && strstr(message, "line") == NULL) goto out;
    }
    w->ok = 1;
out:
    sinew_solver_free(solver);
    return NULL;
}

static void threads(void) {
    enum { T = 4 };
    sinew_problem *problem = NULL;
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(CHAIN, &problem));
    pthread_t ids[T];
    worker workers[T];
    for (int t = 0; t < T; t++) {
        workers[t] = (worker){.problem = problem, .id = t, .ok = 0};
        ASSERT(pthread_create(&ids[t], NULL, work, &workers[t]) == 0);
    }
    for (int t = 0; t < T; t++) ASSERT(pthread_join(ids[t], NULL) == 0);
    for (int t = 0; t < T; t++) {
        ASSERT(workers[t].ok);
        /* Same method, same problem, same start: the same first frame on every thread. */
        ASSERT(memcmp(workers[t].first, workers[t % 2].first, sizeof workers[t].first) == 0);
    }
    sinew_problem_free(problem);
}

/* Every method by its enumerator and its name; a set-up a method cannot honour is
 * SINEW_STATUS_UNSUPPORTED with a message, and the solver stays usable. */
static void methods(void) {
    static const struct { uint32_t id; const char *name; } all[] = {
        {SINEW_METHOD_FABRIK, "fabrik"},
        {SINEW_METHOD_DLS, "dls"},
        {SINEW_METHOD_FABRIK_CLASSIC, "fabrik_classic"},
        {SINEW_METHOD_CCD, "ccd"},
        {SINEW_METHOD_TRIANGULATION, "triangulation"},
    };
    sinew_problem *chain = NULL, *oriented = NULL;
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(CHAIN, &chain));
    EXPECT(SINEW_STATUS_OK, sinew_problem_from_json(
                                "{\"format\": \"sinew.problem/1\", \"bones\": ["
                                "{\"name\": \"a\", \"head\": [0,0,0], \"tail\": [0,0,1]},"
                                "{\"name\": \"b\", \"parent\": \"a\", \"head\": [0,0,1], \"tail\": [0,0,2]}],"
                                "\"goals\": [{\"bone\": \"b\", \"target\": [1, 0, 1], \"orientation\": [1, 0, 0, 0]}]}",
                                &oriented));
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ASSERT(strcmp(sinew_method_name(all[i].id), all[i].name) == 0);
        sinew_settings settings;
        EXPECT(SINEW_STATUS_OK, sinew_settings_default(&settings));
        settings.method = all[i].id;
        settings.max_iterations = 500;
        sinew_solver *solver = NULL;
        EXPECT(SINEW_STATUS_OK, sinew_solver_new(&settings, &solver));
        sinew_solve_info info;
        EXPECT(SINEW_STATUS_OK, sinew_solver_solve(solver, chain, NULL, 0, NULL, &info));
        ASSERT(info.reached && info.bone_count == N && isfinite(info.worst_residual));
        if (all[i].id == SINEW_METHOD_TRIANGULATION) {
            EXPECT(SINEW_STATUS_UNSUPPORTED, sinew_solver_solve(solver, oriented, NULL, 0, NULL, &info));
            ASSERT(strcmp(sinew_status_name(SINEW_STATUS_UNSUPPORTED), "SINEW_STATUS_UNSUPPORTED") == 0);
            /* The last solution is still the chain's. */
            EXPECT(SINEW_STATUS_OK, sinew_solver_info(solver, &info));
            ASSERT(info.bone_count == N);
        } else {
            EXPECT(SINEW_STATUS_OK, sinew_solver_solve(solver, oriented, NULL, 0, NULL, &info));
        }
        sinew_solver_free(solver);
    }
    sinew_problem_free(chain);
    sinew_problem_free(oriented);
}

int main(void) {
    rig_new_arguments();
    rig_functions();
    problem_functions();
    solver_functions();
    methods();
    error_messages();
    threads();
    printf("hardening: %d checks passed\n", checks);
    return 0;
}
