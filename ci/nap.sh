# ci/nap.sh, sourced by the scripts that run inside ci/rxe-cluster's guests: `nap SECONDS` waits
# without starting a process. In a guest under TCG each process started costs about 0.1 s, half
# of it CPU (50 runs of /bin/true: 4.9 s), so a loop that ran sleep(1) every 0.1 s took a
# quarter of a node's one core; a read with a timeout on a FIFO no one writes costs ~4 ms.
# (Bash's <(:) would need /dev/fd, which the guests do not have.)
nap_fifo=${TMPDIR:-/tmp}/nap.$$.$RANDOM
mkfifo "$nap_fifo"
exec {nap_fd}<>"$nap_fifo"
rm -f "$nap_fifo"
nap() { read -rt "$1" -u "$nap_fd" _ || :; }
