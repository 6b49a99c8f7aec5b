"""Implementation of Sonnet. Import from `sonnet` instead; this is private."""
