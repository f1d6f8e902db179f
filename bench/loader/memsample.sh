#!/usr/bin/env bash
# memsample.sh PID PREFIX: sample /proc/PID/status every 20 ms until
# PREFIX.stop exists or the process ends; write the peak RssAnon (kB,
# private memory, which excludes shared_buffers pages the backend touched)
# to PREFIX.peak_anon.  The backend's parallel workers count with it: each
# sample adds the RssAnon of every live process whose title is "parallel
# worker for PID <PID>", looked for every 100 ms among processes started
# after the backend.
#
# The loop starts no process: it waits with a timed read on a FIFO nobody
# writes to.  A forked sleep, 50 times a second, slowed the measured
# backend by some 10% on a 2-core machine.
pid=$1 prefix=$2 max=0 tick=0 workers=()
mkfifo "$prefix.fifo" && exec 3<>"$prefix.fifo" && rm -f "$prefix.fifo"

rss_anon() {  # rss_anon PID: its RssAnon in kB into $anon, 0 if it is gone (no subshell)
	local k v
	anon=0
	while read -r k v _; do
		if [ "$k" = RssAnon: ]; then
			anon=$v
			return
		fi
	done <"/proc/$1/status" 2>/dev/null
}

find_workers() {
	local d p title
	workers=()
	for d in /proc/[0-9]*; do
		p=${d#/proc/}
		[ "$p" -gt "$pid" ] || continue
		IFS= read -r -d '' title <"$d/cmdline" 2>/dev/null
		[[ $title == *"parallel worker for PID $pid"* ]] && workers+=("$p")
	done
}

while [ ! -e "$prefix.stop" ] && [ -r "/proc/$pid/status" ]; do
	[ $((tick % 5)) -eq 0 ] && find_workers
	tick=$((tick + 1))
	total=0
	for p in "$pid" "${workers[@]}"; do
		rss_anon "$p"
		total=$((total + anon))
	done
	[ "$total" -gt "$max" ] && max=$total
	read -r -t 0.02 -u 3 _ || true
done
echo "$max" >"$prefix.peak_anon"
