#!/usr/bin/env bash
# memsample.sh PID PREFIX: sample /proc/PID/status every 20 ms until
# PREFIX.stop exists or the process ends; write the peak RssAnon (kB,
# private memory, which excludes shared_buffers pages the backend touched)
# to PREFIX.peak_anon.
#
# The loop starts no process: it waits with a timed read on a FIFO nobody
# writes to.  A forked sleep, 50 times a second, slowed the measured
# backend by some 10% on a 2-core machine.
pid=$1 prefix=$2 max=0
mkfifo "$prefix.fifo" && exec 3<>"$prefix.fifo" && rm -f "$prefix.fifo"
while [ ! -e "$prefix.stop" ] && [ -r "/proc/$pid/status" ]; do
	while read -r k v _; do
		if [ "$k" = RssAnon: ]; then
			[ "$v" -gt "$max" ] && max=$v
			break
		fi
	done <"/proc/$pid/status" 2>/dev/null || break
	read -r -t 0.02 -u 3 _ || true
done
echo "$max" >"$prefix.peak_anon"
