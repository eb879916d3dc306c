-- A node's executor pool at its heartbeat (model.Node.PoolInUse and
-- PoolCapacity), for GET /api/v1/nodes. Nodes of an older version leave
-- them 0.
ALTER TABLE nodes ADD COLUMN pool_in_use INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN pool_capacity INTEGER NOT NULL DEFAULT 0;
