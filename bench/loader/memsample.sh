#!/usr/bin/env bash
# memsample.sh PID PREFIX: sample /proc/PID/status every 20 ms until
# PREFIX.stop exists or the process ends; write the peak RssAnon (kB,
# private memory, which excludes shared_buffers pages the backend touched)
# to PREFIX.peak_anon.
pid=$1 prefix=$2 max=0
while [ ! -e "$prefix.stop" ] && [ -r "/proc/$pid/status" ]; do
	while read -r k v _; do
		if [ "$k" = RssAnon: ]; then
			[ "$v" -gt "$max" ] && max=$v
			break
		fi
	done <"/proc/$pid/status" 2>/dev/null || break
	sleep 0.02
done
echo "$max" >"$prefix.peak_anon"
