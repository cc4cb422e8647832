-- keel-store-postgres schema version 1: heads, commit facts and worker leases.
-- Runs inside the migration transaction with search_path set to the store's schema.

-- One row per tree: the authoritative head. Every commit locks this row (SELECT ... FOR
-- UPDATE), decides against it and advances it with an UPDATE conditioned on the locked values,
-- so two writers can never both advance from the same head.
CREATE TABLE heads (
    root_id      text        PRIMARY KEY,
    incarnation  text        NOT NULL,
    sequence     bigint      NOT NULL CHECK (sequence >= 0),
    digest       bytea       NOT NULL CHECK (length(digest) = 32),
    cut          bytea       NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Every installed commit, in installation order per tree. Identical retries install nothing,
-- so this is exactly the sequence of heads the tree held. (root_id, identity) is unique: a
-- commit identity is one fact forever, whatever the writer.
CREATE TABLE commits (
    root_id              text        NOT NULL REFERENCES heads (root_id),
    position             bigint      NOT NULL CHECK (position >= 1),
    identity             text        NOT NULL,
    content_digest       bytea       NOT NULL CHECK (length(content_digest) = 32),
    kind                 text        NOT NULL,
    effect_process       text,
    effect_id            text,
    previous_incarnation text,
    sequence             bigint      NOT NULL CHECK (sequence >= 0),
    incarnation          text        NOT NULL,
    cut_digest           bytea       NOT NULL CHECK (length(cut_digest) = 32),
    committed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (root_id, position),
    UNIQUE (root_id, identity)
);

-- Work for leased workers, one row per run. A worker owns a run while `expires_at` (set from
-- the database clock) is in the future; an open run whose lease lapsed may be claimed by any
-- worker, which restores it under a new incarnation (the activation commit fences the old one).
CREATE TABLE leases (
    root_id     text        PRIMARY KEY,
    message     text        NOT NULL,
    state       text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'held', 'finished')),
    owner       text,
    expires_at  timestamptz,
    claims      integer     NOT NULL DEFAULT 0,
    detail      text,
    submitted_at timestamptz NOT NULL DEFAULT now(),
    -- An open run is either free (no owner, no expiry) or owned until expires_at; a closed run
    -- keeps its last owner and has no expiry.
    CHECK (CASE WHEN state = 'open' THEN (owner IS NULL) = (expires_at IS NULL)
                ELSE owner IS NOT NULL AND expires_at IS NULL END)
);

CREATE INDEX leases_claimable ON leases (expires_at) WHERE state = 'open';
