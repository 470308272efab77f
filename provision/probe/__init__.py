"""The probe pipeline: the gather script, probing hosts (or replaying captures), the facts
folder, facts for plans (cached or probed now), and the probe report."""
