-- A schema-version-1 gpuorch state store (before migration 2), dumped with sqlite3 .dump; loaded by test_migrations.py.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE job (
	id INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	spec TEXT NOT NULL, 
	status VARCHAR(10) NOT NULL, 
	message VARCHAR, 
	cancel_requested BOOLEAN NOT NULL, 
	preemptions INTEGER NOT NULL, 
	failures INTEGER NOT NULL, 
	exit_code INTEGER, 
	result TEXT, 
	created_at DATETIME NOT NULL, 
	updated_at DATETIME, 
	finished_at DATETIME, 
	not_before DATETIME, 
	lease_owner VARCHAR, 
	lease_expires DATETIME, 
	PRIMARY KEY (id)
);
INSERT INTO job VALUES(1,'old-job','{"name":"old-job","run":"true"}','SUCCEEDED',NULL,0,0,0,0,NULL,'2026-01-01 00:00:00.000000',NULL,NULL,NULL,NULL,NULL);
INSERT INTO job VALUES(2,'queued-job','{"name":"queued-job","run":"true"}','QUEUED',NULL,0,0,0,NULL,NULL,'2026-01-01 00:00:00.000000',NULL,NULL,NULL,NULL,NULL);
CREATE TABLE instance (
	id INTEGER NOT NULL, 
	provider VARCHAR NOT NULL, 
	instance_id VARCHAR NOT NULL, 
	job_id INTEGER, 
	attempt INTEGER, 
	region VARCHAR NOT NULL, 
	zone VARCHAR NOT NULL, 
	instance_type VARCHAR NOT NULL, 
	spot BOOLEAN NOT NULL, 
	state VARCHAR NOT NULL, 
	first_seen DATETIME, 
	last_seen DATETIME, 
	terminated_at DATETIME, 
	PRIMARY KEY (id), 
	UNIQUE (provider, instance_id)
);
CREATE TABLE event (
	id INTEGER NOT NULL, 
	ts DATETIME NOT NULL, 
	job_id INTEGER, 
	attempt INTEGER, 
	kind VARCHAR NOT NULL, 
	message VARCHAR NOT NULL, 
	data TEXT, 
	PRIMARY KEY (id)
);
INSERT INTO event VALUES(1,'2026-01-01 00:00:00.000000',1,NULL,'submitted','job old-job queued',NULL);
CREATE TABLE backoff (
	"key" VARCHAR NOT NULL, 
	until DATETIME NOT NULL, 
	reason VARCHAR NOT NULL, 
	PRIMARY KEY ("key")
);
CREATE TABLE meta (
	"key" VARCHAR NOT NULL, 
	value VARCHAR NOT NULL, 
	PRIMARY KEY ("key")
);
INSERT INTO meta VALUES('schema_version','1');
INSERT INTO meta VALUES('installation_id','v1fixture000');
CREATE TABLE attempt (
	id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	number INTEGER NOT NULL, 
	status VARCHAR(9) NOT NULL, 
	reason VARCHAR(13), 
	message VARCHAR, 
	provider VARCHAR NOT NULL, 
	region VARCHAR NOT NULL, 
	zone VARCHAR NOT NULL, 
	instance_type VARCHAR NOT NULL, 
	gpu VARCHAR, 
	gpu_count INTEGER NOT NULL, 
	spot BOOLEAN NOT NULL, 
	price_per_hour FLOAT NOT NULL, 
	billing_granularity_s INTEGER NOT NULL, 
	min_billing_s INTEGER NOT NULL, 
	instance_id VARCHAR, 
	predecessor INTEGER, 
	requested_at DATETIME, 
	launched_at DATETIME, 
	started_at DATETIME, 
	notice_at DATETIME, 
	drain_until DATETIME, 
	ended_at DATETIME, 
	resumed_from VARCHAR, 
	last_checkpoint VARCHAR, 
	last_checkpoint_at DATETIME, 
	exit_code INTEGER, 
	lost_work_s FLOAT, 
	PRIMARY KEY (id), 
	UNIQUE (job_id, number), 
	FOREIGN KEY(job_id) REFERENCES job (id)
);
INSERT INTO attempt VALUES(1,1,1,'ENDED','SUCCEEDED',NULL,'fake','r1','r1-a','gpu.a100','A100-80GB',1,1,1.1999999999999999555,1,60,'fake-1',NULL,'2026-01-01 00:00:00.000000','2026-01-01 00:00:00.000000','2026-01-01 00:00:00.000000',NULL,NULL,'2026-01-01 01:00:00.000000',NULL,NULL,NULL,0,NULL);
CREATE TABLE checkpoint (
	id INTEGER NOT NULL, 
	job_id INTEGER NOT NULL, 
	attempt INTEGER NOT NULL, 
	name VARCHAR NOT NULL, 
	step INTEGER, 
	completed_at DATETIME, 
	recorded_at DATETIME, 
	final BOOLEAN NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (job_id, name), 
	FOREIGN KEY(job_id) REFERENCES job (id)
);
INSERT INTO checkpoint VALUES(1,1,1,'step-10',10,NULL,'2026-01-01 00:00:00.000000',0);
CREATE INDEX ix_job_name ON job (name);
CREATE INDEX ix_job_status ON job (status);
CREATE INDEX ix_instance_job_id ON instance (job_id);
CREATE INDEX ix_event_ts ON event (ts);
CREATE INDEX ix_event_job_id ON event (job_id);
CREATE INDEX ix_attempt_instance_id ON attempt (instance_id);
CREATE INDEX ix_attempt_job_id ON attempt (job_id);
CREATE INDEX ix_attempt_status ON attempt (status);
CREATE INDEX ix_checkpoint_job_id ON checkpoint (job_id);
COMMIT;
