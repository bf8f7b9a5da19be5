"""The reference developer app; today, the dev demo origin."""
