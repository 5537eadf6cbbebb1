-- Worker recovery: counters of the maintenance passes for operators' metrics.

CREATE TABLE yuxi.maintenance_counters (
    name   text PRIMARY KEY CHECK (name ~ '^[a-z][a-z_]{0,62}$'),
    value  bigint NOT NULL DEFAULT 0 CHECK (value >= 0)
);
INSERT INTO yuxi.maintenance_counters (name, value) VALUES
    ('lease_expired', 0),
    ('lease_released', 0),
    ('redelivered_missing', 0),
    ('redelivered_stalled', 0);
COMMENT ON TABLE yuxi.maintenance_counters IS
    'Counts of maintenance work since the database was created: lease_expired (leases the reconciler ended), lease_released (of those, runs put back to pending for another attempt), redelivered_missing (pending runs re-delivered because their job was missing or finished), redelivered_stalled (pending runs re-delivered because their job''s worker stopped)';
