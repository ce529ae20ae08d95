-- A policy may let a step it would block run with fewer output tokens instead ('shrink'), or
-- keep denying it whatever the request asks ('block'). NULL: as the request's onExceed says.
ALTER TABLE policies ADD COLUMN on_exceed text CHECK (on_exceed IN ('block', 'shrink'));
