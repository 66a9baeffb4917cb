"""The Slack front end (`debugger slack`): app.py (bolt handlers), intake.py (allowlists, rate limits, uploads),
conversations.py (one investigation per thread), agent/render/slack_blocks.py (Block Kit), post.py (redacted posting)."""
