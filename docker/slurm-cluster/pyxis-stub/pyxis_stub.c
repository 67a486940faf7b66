/*
 * A stand-in for pyxis on the test cluster (pyxis and enroot have no Debian package): a
 * SPANK plugin that registers pyxis' srun options, so that srun accepts and forwards them
 * exactly as it does for pyxis, and that shows on the node what it received. No container:
 * the task runs on the node, with
 *   PYXIS_STUB_IMAGE, PYXIS_STUB_MOUNTS, PYXIS_STUB_WORKDIR, PYXIS_STUB_ENV,
 *   PYXIS_STUB_MOUNT_HOME ("0" after --no-container-mount-home)
 * set to the options' values, and in the --container-workdir when one is given (pyxis
 * starts the task there inside the container).
 * Built by lib/pyxis_stub.sh against the cluster's Slurm headers (spank.h); listed in
 * plugstack.conf as optional. Options as in pyxis' README (NVIDIA/pyxis, 0.20).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis_stub, 1);

enum { IMAGE, MOUNTS, WORKDIR, ENV, NAME, MOUNT_HOME, NO_MOUNT_HOME, NOPTS };
static char *values[NOPTS];
static const char *names[] = {
    "PYXIS_STUB_IMAGE", "PYXIS_STUB_MOUNTS", "PYXIS_STUB_WORKDIR",
    "PYXIS_STUB_ENV", "PYXIS_STUB_NAME",
};

static int take(int val, const char *optarg, int remote)
{
    (void) remote;
    if (val < 0 || val >= NOPTS)
        return -1;
    free(values[val]);
    values[val] = strdup(optarg ? optarg : "");
    return values[val] ? 0 : -1;
}

struct spank_option spank_options[] = {
    {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[pyxis stub] the image", 1, IMAGE, take},
    {"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis stub] bind mounts", 1, MOUNTS, take},
    {"container-workdir", "PATH", "[pyxis stub] working directory inside", 1, WORKDIR, take},
    {"container-env", "NAME[,NAME...]", "[pyxis stub] variables that override the image's", 1, ENV, take},
    {"container-name", "NAME", "[pyxis stub] container name", 1, NAME, take},
    {"container-mount-home", NULL, "[pyxis stub] mount the home directory", 0, MOUNT_HOME, take},
    {"no-container-mount-home", NULL, "[pyxis stub] do not mount the home directory", 0, NO_MOUNT_HOME, take},
    SPANK_OPTIONS_TABLE_END
};

/* In each task, before the command: what pyxis would have been asked to do. */
int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void) ac;
    (void) av;
    if (!spank_remote(sp) || values[IMAGE] == NULL)
        return 0;
    for (int i = IMAGE; i <= NAME; i++)
        if (values[i] && spank_setenv(sp, names[i], values[i], 1) != ESPANK_SUCCESS)
            return -1;
    if (spank_setenv(sp, "PYXIS_STUB_MOUNT_HOME", values[NO_MOUNT_HOME] ? "0" : "1", 1)
        != ESPANK_SUCCESS)
        return -1;
    if (values[WORKDIR] && chdir(values[WORKDIR]) != 0) {
        slurm_error("pyxis stub: cannot enter --container-workdir %s", values[WORKDIR]);
        return -1;
    }
    return 0;
}
