-- (b) the hand-written pipeline.
\ir pipeline.sql
