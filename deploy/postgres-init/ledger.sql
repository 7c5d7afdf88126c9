-- Run once by the postgres image when its volume is first initialised: the privacy budget ledger gets its
-- own database beside Prefect's (ldp_dask creates its tables there on first use).
CREATE DATABASE ldp_ledger;
