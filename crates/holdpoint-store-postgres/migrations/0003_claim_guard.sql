-- A claim appends "resumedAt" and "resumeLeaseUntil" to the stored document
-- (migration 2, part 4). That kept the document one JSON object only when
-- neither key was in it already, and a row saved with a lease but no
-- "resumedAt" (`resumed_at_ns` unset) had one: its claim wrote the key
-- twice, and the row no longer decoded. A claim now takes this path only
-- when the document names neither key anywhere; otherwise it takes no row
-- here, and the store claims that row through its general path, which
-- decodes the document and writes it back whole (src/write.rs).
CREATE OR REPLACE FUNCTION holdpoint_claim(p_ids TEXT[], p_at_ns BIGINT[], p_members TEXT[])
RETURNS SETOF INTEGER
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        UPDATE holdpoint_snapshots
           SET resumed_at_ns = p_at_ns[i],
               data = (left(data::text, -1) || ',' || p_members[i] || '}')::json
         WHERE snapshot_id = p_ids[i] AND resumed_at_ns IS NULL
           AND strpos(data::text, '"resumedAt"') = 0
           AND strpos(data::text, '"resumeLeaseUntil"') = 0;
        IF FOUND THEN
            RETURN NEXT i - 1;
        END IF;
    END LOOP;
END
$$;
