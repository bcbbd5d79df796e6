-- The SQL interface reads a time as HTTP does (domain/times.py, msgspec's RFC 3339). It used to
-- hand the text to PostgreSQL's own parser, which refuses an offset past ±15:59 (HTTP takes any
-- up to ±23:59 and counts the time in UTC) with an error outside the interface's codes, and
-- takes a 60th second and the hour 24, which HTTP refuses. Now the fields are checked first, the
-- local time is read without its offset, and the offset is applied by hand.
CREATE OR REPLACE FUNCTION werk._time(v jsonb, loc text) RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
    f text[];
    local timestamp;
    t timestamptz;
    shift interval;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) = 'string' THEN
        -- date, hour, minute, second, fraction, zone, offset sign, offset hours, offset minutes
        f := regexp_match(v #>> '{}', '^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?'
                                      '([Zz]|([+-])(\d{2}):(\d{2}))$');
    END IF;
    IF f IS NULL THEN
        PERFORM werk._invalid(loc, 'must be an RFC 3339 time with a zone, e.g. '
                                   '2030-01-02T03:04:05Z');
    END IF;
    IF f[2]::int > 23 OR f[3]::int > 59 OR f[4]::int > 59
       OR coalesce(f[8]::int, 0) > 23 OR coalesce(f[9]::int, 0) > 59 THEN
        PERFORM werk._invalid(loc, 'is not a valid time');
    END IF;
    BEGIN
        local := (f[1] || ' ' || f[2] || ':' || f[3] || ':' || f[4]
                  || coalesce(f[5], ''))::timestamp;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM werk._invalid(loc, 'is not a valid time');
    END;
    shift := make_interval(hours => coalesce(f[8]::int, 0), mins => coalesce(f[9]::int, 0));
    t := local AT TIME ZONE 'UTC';
    t := CASE f[7] WHEN '+' THEN t - shift WHEN '-' THEN t + shift ELSE t END;
    IF t NOT BETWEEN '0001-01-01 00:00:00+00' AND '9999-12-31 23:59:59.999999+00' THEN
        PERFORM werk._invalid(loc, 'must lie between 0001-01-01T00:00:00Z and '
                                   '9999-12-31T23:59:59.999999Z (in UTC)');
    END IF;
    RETURN t;
END
$$;

-- As 0013_sql_interface.sql: the search path fixed to this schema, nothing for PUBLIC.
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION werk._time(jsonb, text) SET search_path = %I, pg_temp',
                   current_schema());
    REVOKE ALL ON FUNCTION werk._time(jsonb, text) FROM PUBLIC;
END
$$;
