CREATE TABLE `cronq_schedule_ticks` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`schedule_name` varchar(64) NOT NULL,
	`scheduled_at` datetime(6) NOT NULL,
	`period_key` varchar(32) NOT NULL,
	`outcome` enum('enqueued','skipped') NOT NULL,
	`jobs_enqueued` int unsigned NOT NULL DEFAULT 0,
	`jobs_existing` int unsigned NOT NULL DEFAULT 0,
	`caught_up` boolean NOT NULL DEFAULT false,
	`note` varchar(255),
	`claimed_by` varchar(255),
	`fanout_until` datetime(6),
	`started_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`finished_at` datetime(6),
	CONSTRAINT `cronq_schedule_ticks_id` PRIMARY KEY(`id`),
	CONSTRAINT `cronq_schedule_ticks_tick` UNIQUE(`schedule_name`,`scheduled_at`)
);
--> statement-breakpoint
CREATE INDEX `cronq_schedule_ticks_unfinished` ON `cronq_schedule_ticks` (`schedule_name`,`finished_at`);--> statement-breakpoint
ALTER TABLE `cronq_schedule_ticks` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
