-- (d) COPY of the staged rows into an empty table with the same columns
-- (no index), from a file written beforehand by COPY TO.
COPY stage_copy FROM :'copy_file';
