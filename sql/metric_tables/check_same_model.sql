-- Citations judged by the model that wrote the answer (judge_differs_from_answer_model).
select count(*) from support_verdicts where judge_is_answer_model
