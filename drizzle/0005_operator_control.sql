CREATE TABLE `cronq_kind_limits` (
	`kind` varchar(128) NOT NULL,
	`max_running` int unsigned NOT NULL,
	`updated_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	CONSTRAINT `cronq_kind_limits_kind` PRIMARY KEY(`kind`)
);
--> statement-breakpoint
CREATE TABLE `cronq_pauses` (
	`target` enum('schedule','queue') NOT NULL,
	`name` varchar(128) NOT NULL,
	`reason` varchar(255),
	`paused_by` varchar(255) NOT NULL,
	`paused_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	CONSTRAINT `cronq_pauses_target_name_pk` PRIMARY KEY(`target`,`name`)
);
--> statement-breakpoint
ALTER TABLE `cronq_jobs` MODIFY COLUMN `status` enum('ready','reserved','done','dead','cancelled') NOT NULL DEFAULT 'ready';--> statement-breakpoint
ALTER TABLE `cronq_jobs` ADD `cancelled_by` varchar(255);--> statement-breakpoint
ALTER TABLE `cronq_jobs` ADD `cancel_reason` varchar(255);--> statement-breakpoint
ALTER TABLE `cronq_kind_limits` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;--> statement-breakpoint
ALTER TABLE `cronq_pauses` CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
