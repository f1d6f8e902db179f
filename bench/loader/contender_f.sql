-- (f) a plain INSERT of the winners into an empty table with the target's
-- columns and primary key: the write floor.
INSERT INTO winners_copy SELECT * FROM winners;
