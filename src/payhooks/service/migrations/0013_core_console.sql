-- payhooks reference shop, version 13: the console's operators, sessions, key and actions are
-- the core's (payhooks_operators, payhooks_console_*; the core's version 7 made them).

-- What the shop's tables hold joins the core's, so operators stay logged in and the timelines
-- keep who did what; failed logins only feed a fifteen-minute rate limit and are not kept.
LOCK TABLE operators, console_sessions, console_keys, console_actions IN ACCESS EXCLUSIVE MODE;
INSERT INTO payhooks_operators (name, password_hash, created_at)
SELECT name, password_hash, created_at FROM operators
ON CONFLICT (name) DO NOTHING;
INSERT INTO payhooks_console_sessions (token_sha256, operator, csrf_token, created_at, expires_at)
SELECT token_sha256, operator, csrf_token, created_at, expires_at FROM console_sessions
ON CONFLICT (token_sha256) DO NOTHING;
INSERT INTO payhooks_console_keys (id, secret, created_at)
SELECT id, secret, created_at FROM console_keys
ON CONFLICT (id) DO NOTHING;
INSERT INTO payhooks_console_actions (at, operator, action, provider, target, result)
SELECT at, operator, action, provider, target, result FROM console_actions ORDER BY id;
DROP TABLE console_actions, console_keys, console_login_failures, console_sessions, operators;
