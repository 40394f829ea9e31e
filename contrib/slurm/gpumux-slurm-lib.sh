# Shared by gpumux's Slurm scripts (sourced). Settings come from /etc/gpumux/slurm.conf (shell
# assignments; another file through GPUMUX_SLURM_CONF):
#   GPUMUX_BIN                 the gpumux command (default: gpumux on PATH, else /usr/bin/gpumux)
#   GPUMUX_RUNTIME_DIR         gpumuxd's socket directory (default /run/gpumux)
#   GPUMUX_SLURM_DIR           where the Prolog registers jobs (default $GPUMUX_RUNTIME_DIR/slurm)
#   GPUMUX_SLURM_BEST_PRIORITY the best priority a job may ask for (default 0: any)
#   GPUMUX_SLURM_DEFAULT_PRIORITY  a job that asks for none (default 5)
# A job asks with --comment "gpumux:priority=N" (also gpumux:name=NAME, gpumux:oversubscribe),
# or with GPUMUX_PRIORITY in its environment (sbatch --export=ALL,GPUMUX_PRIORITY=N).
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
conf=${GPUMUX_SLURM_CONF:-/etc/gpumux/slurm.conf}
# shellcheck disable=SC1090
[ -r "$conf" ] && . "$conf"
GPUMUX_RUNTIME_DIR=${GPUMUX_RUNTIME_DIR:-/run/gpumux}
GPUMUX_SLURM_DIR=${GPUMUX_SLURM_DIR:-$GPUMUX_RUNTIME_DIR/slurm}
GPUMUX_SLURM_BEST_PRIORITY=${GPUMUX_SLURM_BEST_PRIORITY:-0}
GPUMUX_SLURM_DEFAULT_PRIORITY=${GPUMUX_SLURM_DEFAULT_PRIORITY:-5}
if [ -z "${GPUMUX_BIN:-}" ]; then
    GPUMUX_BIN=$(command -v gpumux || echo /usr/bin/gpumux)
fi

gpumux_log() { echo "gpumux-slurm: job ${SLURM_JOB_ID:-?}: $*" >&2; }

# A priority 0..9, or nothing.
gpumux_valid_priority() { case $1 in [0-9]) echo "$1" ;; esac; }

# The job's registration file (written by the Prolog).
gpumux_job_file() { echo "$GPUMUX_SLURM_DIR/job_${SLURM_JOB_ID}"; }
