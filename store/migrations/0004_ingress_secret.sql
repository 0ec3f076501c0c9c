-- The secret the server sends with every request to a host's ingress, which refuses any request
-- without it; a new one at each registration. Kept in the clear: the server must send it. Null for
-- a host that has not registered since this column came.
ALTER TABLE hosts ADD COLUMN ingress_secret text;
