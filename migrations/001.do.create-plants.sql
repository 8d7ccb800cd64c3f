-- The plants table: the id is the client's int64, kept exact as bigint.
-- tag is NULL when the client sent none.
CREATE TABLE plants (
  id bigint PRIMARY KEY,
  name text NOT NULL,
  tag text,
  created_at timestamptz NOT NULL DEFAULT now()
);
