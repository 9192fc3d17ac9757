CREATE TABLE `cronq_daemons` (
	`id` varchar(255) NOT NULL,
	`host` varchar(255) NOT NULL,
	`pid` int unsigned NOT NULL,
	`kinds` json NOT NULL,
	`queues` json,
	`started_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`heartbeat_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`stopped_at` datetime(6),
	CONSTRAINT `cronq_daemons_id` PRIMARY KEY(`id`)
);
--> statement-breakpoint
ALTER TABLE `cronq_schedule_ticks` MODIFY COLUMN `outcome` enum('enqueued','skipped','failed') NOT NULL;--> statement-breakpoint
ALTER TABLE `cronq_jobs` ADD `lease_expiries` smallint unsigned DEFAULT 0 NOT NULL;--> statement-breakpoint
CREATE INDEX `cronq_daemons_heartbeat` ON `cronq_daemons` (`heartbeat_at`);--> statement-breakpoint
ALTER TABLE `cronq_daemons` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;--> statement-breakpoint
-- Job keys compare byte for byte, trailing spaces included: a NO PAD binary collation
-- (utf8mb4_bin pads, so 'a' and 'a ' collided). The name differs between the servers.
SET @cronq_key_collation = IF(VERSION() LIKE '%MariaDB%', 'utf8mb4_nopad_bin', 'utf8mb4_0900_bin');--> statement-breakpoint
SET @cronq_ddl = CONCAT('ALTER TABLE `cronq_jobs` MODIFY `job_key` varchar(255) CHARACTER SET utf8mb4 COLLATE ', @cronq_key_collation, ' NOT NULL');--> statement-breakpoint
PREPARE cronq_stmt FROM @cronq_ddl;--> statement-breakpoint
EXECUTE cronq_stmt;--> statement-breakpoint
SET @cronq_ddl = CONCAT('ALTER TABLE `cronq_dead_letters` MODIFY `job_key` varchar(255) CHARACTER SET utf8mb4 COLLATE ', @cronq_key_collation, ' NOT NULL');--> statement-breakpoint
PREPARE cronq_stmt FROM @cronq_ddl;--> statement-breakpoint
EXECUTE cronq_stmt;--> statement-breakpoint
DEALLOCATE PREPARE cronq_stmt;
