CREATE TABLE `cronq_dead_letters` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`job_id` bigint unsigned NOT NULL,
	`queue` varchar(64) NOT NULL,
	`kind` varchar(128) NOT NULL,
	`job_key` varchar(255) NOT NULL,
	`payload` json NOT NULL,
	`failure_reason` text NOT NULL,
	`attempts` smallint unsigned NOT NULL,
	`dead_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`reviewed_at` datetime(6),
	`resolution` text,
	CONSTRAINT `cronq_dead_letters_id` PRIMARY KEY(`id`)
);
--> statement-breakpoint
CREATE TABLE `cronq_jobs` (
	`id` bigint unsigned AUTO_INCREMENT NOT NULL,
	`queue` varchar(64) NOT NULL DEFAULT 'default',
	`kind` varchar(128) NOT NULL,
	`job_key` varchar(255) NOT NULL,
	`payload` json NOT NULL,
	`status` enum('ready','reserved','done','dead') NOT NULL DEFAULT 'ready',
	`attempts` smallint unsigned NOT NULL DEFAULT 0,
	`max_attempts` smallint unsigned NOT NULL DEFAULT 5,
	`available_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`lease_token` char(32),
	`lease_until` datetime(6),
	`locked_by` varchar(255),
	`last_error` text,
	`schedule_name` varchar(64),
	`period_key` varchar(32),
	`scheduled_at` datetime(6),
	`created_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`updated_at` datetime(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
	`finished_at` datetime(6),
	CONSTRAINT `cronq_jobs_id` PRIMARY KEY(`id`),
	CONSTRAINT `cronq_jobs_job_key` UNIQUE(`job_key`)
);
--> statement-breakpoint
CREATE INDEX `cronq_dead_letters_review` ON `cronq_dead_letters` (`reviewed_at`,`dead_at`,`id`);--> statement-breakpoint
CREATE INDEX `cronq_dead_letters_job` ON `cronq_dead_letters` (`job_id`);--> statement-breakpoint
CREATE INDEX `cronq_jobs_claim` ON `cronq_jobs` (`status`,`available_at`,`id`);--> statement-breakpoint
CREATE INDEX `cronq_jobs_claim_queue` ON `cronq_jobs` (`queue`,`status`,`available_at`,`id`);--> statement-breakpoint
CREATE INDEX `cronq_jobs_recovery` ON `cronq_jobs` (`status`,`lease_until`,`id`);--> statement-breakpoint
CREATE INDEX `cronq_jobs_schedule` ON `cronq_jobs` (`schedule_name`,`period_key`);