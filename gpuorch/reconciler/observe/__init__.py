"""The observe stage: what a pass reads before it decides. The claim of the jobs' leases
(``leases.py``), the held rows and specs (``rows.py``), the providers' offers, instances and
back-offs (``listing.py``), the agents' status reads (``status_reads.py``), and the snapshot of one
job that decide sees (``views.py``). Nothing here imports the decide or apply stages."""
