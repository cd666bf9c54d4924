/*
 * example.c: solve an IK problem file with Sinew's C API and print the pose.
 *
 *   cc -std=c99 -I ffi ffi/example.c -L target/debug -lsinew -Wl,-rpath,target/debug -o example
 *   ./example [problem.json]        (default: tests/data/ffi_humanoid13.json)
 *
 * Prints each bone's local rotation [w x y z] (relative to its rest pose, as Blender's
 * pose_bone.rotation_quaternion) and each goal's residual distance. Exits 1 on any error, with
 * the status and sinew's message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sinew.h"

/* Prints the failing call, its status and the thread's last error message. */
static int report(const char *what, sinew_status status) {
    char message[512];
    sinew_last_error_message(message, sizeof message);
    fprintf(stderr, "example: %s failed: %s: %s\n", what, sinew_status_name(status), message);
    return 1;
}

#define CHECK(call)                                   \
    do {                                              \
        sinew_status status_ = (call);                \
        if (status_ != SINEW_STATUS_OK) {             \
            exit_code = report(#call, status_);       \
            goto done;                                \
        }                                             \
    } while (0)

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/data/ffi_humanoid13.json";
    int exit_code = 0;
    sinew_problem *problem = NULL;
    sinew_solver *solver = NULL;
    double *rotations = NULL;
    double *residuals = NULL;
    sinew_settings settings;
    sinew_solve_info info;
    size_t bones = 0, goals = 0, i;

    /* The library must speak the ABI this program was compiled against. */
    if ((sinew_abi_version() >> 16) != SINEW_ABI_VERSION_MAJOR) {
        fprintf(stderr, "example: libsinew ABI %u.%u, header %d.%d\n", sinew_abi_version() >> 16,
                sinew_abi_version() & 0xffffu, SINEW_ABI_VERSION_MAJOR, SINEW_ABI_VERSION_MINOR);
        return 1;
    }

    /* Rig, limits, goals and solver settings all come from the file. */
    CHECK(sinew_problem_load_file(path, &problem));
    CHECK(sinew_problem_settings(problem, &settings));
    CHECK(sinew_solver_new(&settings, &solver));
    CHECK(sinew_problem_bone_count(problem, &bones));
    CHECK(sinew_problem_goal_count(problem, &goals));

    /* NULL start pose: start from the file's pose (or the rest pose). */
    CHECK(sinew_solver_solve(solver, problem, NULL, 0, NULL, &info));

    rotations = malloc(4 * bones * sizeof *rotations);
    residuals = malloc((goals ? goals : 1) * sizeof *residuals);
    if (!rotations || !residuals) {
        fprintf(stderr, "example: out of memory\n");
        exit_code = 1;
        goto done;
    }
    CHECK(sinew_solver_rotations(solver, rotations, 4 * bones));
    CHECK(sinew_solver_residuals(solver, residuals, goals));

    printf("sinew %s: %s\n", sinew_version(), path);
    printf("%zu bones, %zu goals, method %s: %s after %u iterations (%s)\n", bones, goals,
           sinew_method_name(settings.method), sinew_stop_reason_name(info.stop_reason),
           info.iterations, info.reached ? "reached" : "not reached");
    printf("pose (local rotations, w x y z):\n");
    for (i = 0; i < bones; i++) {
        const char *name = NULL;
        const double *q = rotations + 4 * i;
        CHECK(sinew_problem_bone_name(problem, i, &name));
        printf("  %-16s %+.9f %+.9f %+.9f %+.9f\n", name, q[0], q[1], q[2], q[3]);
    }
    printf("residuals:\n");
    for (i = 0; i < goals; i++) {
        sinew_goal goal;
        const char *name = NULL;
        CHECK(sinew_problem_get_goal(problem, i, &goal));
        CHECK(sinew_problem_bone_name(problem, goal.bone, &name));
        printf("  goal %zu (%s): %.9f\n", i, name, residuals[i]);
    }

done:
    free(rotations);
    free(residuals);
    sinew_solver_free(solver); /* both accept NULL */
    sinew_problem_free(problem);
    return exit_code;
}
