# ci/node-answers.sh, sourced by the scripts on node1 of ci/rxe-cluster: `node_answers K` succeeds
# when nodeK answers on the network within 4 s: a TCP connection to its port 9, accepted or
# refused (a refusal comes from its kernel, so it is there). A timeout, or "No route to host"
# (its address no longer resolves: ARP went unanswered for 3 s), is silence. Counting any quick
# failure as an answer, as before, made a node whose link was down answer again once its ARP
# entry expired.
node_answers() {
  local said
  said=$(timeout 4 bash -c "exec 3<>/dev/tcp/10.99.1.$1/9" 2>&1) && return 0
  [[ "$said" == *"Connection refused"* ]]
}
